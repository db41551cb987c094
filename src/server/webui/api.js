'use strict';
// Talking to this server: the API key (asked for when /v1/ answers 401, kept in sessionStorage
// only: gone when the tab closes), JSON errors, and server-sent-event streams read from fetch()
// (EventSource cannot send an Authorization header).
const api = (() => {
  const KEY = 'nanovllm.apiKey';
  let keyWaiters = null;

  function key() {
    try { return sessionStorage.getItem(KEY) || ''; } catch (e) { return ''; }
  }
  function setKey(k) {
    try { if (k) sessionStorage.setItem(KEY, k); else sessionStorage.removeItem(KEY); } catch (e) { /* private mode */ }
  }

  function headers(json) {
    const h = {};
    if (json) h['Content-Type'] = 'application/json';
    const k = key();
    if (k) h['Authorization'] = 'Bearer ' + k;
    return h;
  }

  // Shows the key dialog; resolves true when a key was entered. Concurrent callers share it.
  function askKey(reason) {
    if (keyWaiters) return new Promise((res) => keyWaiters.push(res));
    keyWaiters = [];
    const dlg = document.getElementById('key-dialog');
    const input = document.getElementById('key-input');
    const form = document.getElementById('key-form');
    const cancel = document.getElementById('key-cancel');
    dlg.querySelector('.hint').textContent = reason ||
      'This server wants an API key. It is kept in this browser tab\'s session only.';
    input.value = '';
    return new Promise((resolve) => {
      const done = (ok) => {
        form.removeEventListener('submit', onSubmit);
        cancel.removeEventListener('click', onCancel);
        dlg.removeEventListener('cancel', onCancel);
        if (dlg.open) dlg.close();
        const waiters = keyWaiters;
        keyWaiters = null;
        resolve(ok);
        waiters.forEach((w) => w(ok));
      };
      const onSubmit = (ev) => {
        ev.preventDefault();
        setKey(input.value.trim());
        done(!!input.value.trim());
      };
      const onCancel = (ev) => { ev.preventDefault(); done(false); };
      form.addEventListener('submit', onSubmit);
      cancel.addEventListener('click', onCancel);
      dlg.addEventListener('cancel', onCancel);
      dlg.showModal();
      input.focus();
    });
  }

  // The message of an OpenAI error body, else the status line.
  async function errorText(res) {
    let text = '';
    try { text = await res.text(); } catch (e) { /* gone */ }
    try {
      const j = JSON.parse(text);
      if (j && j.error && j.error.message) return `${res.status}: ${j.error.message}`;
    } catch (e) { /* not JSON */ }
    return `${res.status} ${res.statusText}` + (text ? ': ' + text.slice(0, 200) : '');
  }

  // fetch() with the key; on 401 asks for a key once and retries.
  async function request(path, opts) {
    opts = opts || {};
    const make = () => fetch(path, {
      method: opts.body === undefined ? 'GET' : 'POST',
      headers: headers(opts.body !== undefined),
      body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
      signal: opts.signal,
      cache: 'no-store',
    });
    const sentWith = key();
    let res = await make();
    // Sent before a key was entered (the page's first requests race the dialog): retry with the
    // key now held rather than asking again. Under load the dashboard's 401 could open the
    // dialog, the key be entered, and only then /v1/models' 401 arrive and ask a second time.
    if (res.status === 401 && key() && key() !== sentWith) {
      await res.text().catch(() => {});
      res = await make();
    }
    if (res.status === 401) {
      const hadKey = !!key();
      await res.text().catch(() => {});
      if (await askKey(hadKey ? 'The API key was refused; enter the right one.' : undefined)) res = await make();
    }
    return res;
  }

  // Yields the JSON payload of each "data:" event until [DONE] or the end of the body.
  async function* events(res) {
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    let buf = '';
    for (;;) {
      const {value, done} = await reader.read();
      if (done) break;
      buf += dec.decode(value, {stream: true});
      let cut;
      while ((cut = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, cut);
        buf = buf.slice(cut + 2);
        const data = block.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trimStart()).join('\n');
        if (!data) continue;
        if (data === '[DONE]') return;
        yield JSON.parse(data);
      }
    }
  }

  // Reads optional number inputs into `out`: num(elementId, key, integer) skips an empty field
  // and throws Error with a message for the user on a bad one.
  function numberReader(out) {
    return (id, k, int) => {
      const v = document.getElementById(id).value.trim();
      if (v === '') return;
      const x = Number(v);
      if (!Number.isFinite(x) || (int && !Number.isInteger(x))) throw new Error(`${k} must be ${int ? 'an integer' : 'a number'}`);
      out[k] = x;
    };
  }

  return {request, events, errorText, askKey, key, setKey, numberReader};
})();
