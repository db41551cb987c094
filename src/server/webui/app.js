'use strict';
// The page's frame: tabs (click, arrow keys, or #chat / #completions / #dashboard in the URL),
// the served model's name, the API-key button, and Esc, which stops whatever is generating.
(() => {
  const $ = (id) => document.getElementById(id);
  const TABS = ['chat', 'completions', 'dashboard'];
  let current = 'chat';

  function show(name, focus) {
    if (!TABS.includes(name)) name = 'chat';
    current = name;
    for (const t of TABS) {
      const tab = $('tab-' + t);
      const on = t === name;
      tab.setAttribute('aria-selected', String(on));
      tab.tabIndex = on ? 0 : -1;
      $('panel-' + t).hidden = !on;
    }
    if (focus) $('tab-' + name).focus();
    dashboard.setActive(name === 'dashboard');
    if (location.hash !== '#' + name) history.replaceState(null, '', '#' + name);
    document.body.dataset.tab = name;
  }

  function init() {
    dashboard.init();
    chat.init('');
    completions.init('');
    TABS.forEach((t, i) => {
      const tab = $('tab-' + t);
      tab.addEventListener('click', () => show(t));
      tab.addEventListener('keydown', (ev) => {
        const step = ev.key === 'ArrowRight' ? 1 : ev.key === 'ArrowLeft' ? -1 : 0;
        if (step) {
          ev.preventDefault();
          show(TABS[(i + step + TABS.length) % TABS.length], true);
        }
      });
    });
    window.addEventListener('hashchange', () => show(location.hash.slice(1)));
    document.addEventListener('visibilitychange', () => dashboard.setActive(current === 'dashboard'));
    document.addEventListener('keydown', (ev) => {
      if (ev.key !== 'Escape' || document.querySelector('dialog[open]')) return;
      if (chat.busy() || completions.busy()) {
        ev.preventDefault();
        chat.stop();
        completions.stop();
      }
    });
    $('key-button').addEventListener('click', async () => {
      await api.askKey(api.key() ? 'Replace the API key for this tab (empty: forget it).' : undefined);
      if (current === 'dashboard') { dashboard.setActive(false); dashboard.setActive(true); }
    });
    show(location.hash.slice(1) || 'chat');
    // The served model's name (also the "model" of every request).
    api.request('/v1/models').then(async (res) => {
      if (!res.ok) return;
      const j = await res.json();
      const id = j.data && j.data[0] && j.data[0].id;
      if (!id) return;
      $('model-name').textContent = id;
      chat.setModel(id);
      completions.setModel(id);
      document.body.dataset.ready = '1';
    }).catch(() => {});
  }

  init();
})();
