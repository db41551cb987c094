'use strict';
// The dashboard tab: numbers from GET /v1/stats/stream (one event a second). Connected only
// while the tab is shown and the page visible, so a forgotten tab costs the server nothing.
// Each value element carries data-value (the raw number) next to its formatted text.
const dashboard = (() => {
  const $ = (id) => document.getElementById(id);
  const HISTORY = 120;  // points in the throughput chart (one per event)
  let controller = null;
  let retry = 0;
  let wanted = false;
  let history = [];

  const pct = (x) => (x === null || x === undefined ? '–' : (100 * x).toFixed(1) + ' %');
  const rate = (x) => (x === null || x === undefined ? '–' : x >= 100 ? x.toFixed(0) : x.toFixed(1));
  const ms = (x) => (x === null || x === undefined ? '–' : x < 0.01 ? (1000 * x).toFixed(2) + ' ms' : x < 10 ? (1000 * x).toFixed(0) + ' ms' : x.toFixed(1) + ' s');
  const int = (x) => (x === null || x === undefined ? '–' : String(x));

  // [id, label, value(ev), format, sub(ev)]
  const CARDS = [
    ['prompt-tps', 'prompt tok/s', (e) => e.prompt_tps, rate, (e) => `${e.prompt_tokens_total} prompt tokens served`],
    ['generation-tps', 'generation tok/s', (e) => e.generation_tps, rate, (e) => `${e.generation_tokens_total} tokens generated`],
    ['running', 'running requests', (e) => e.running, int, (e) => `batch ${e.batch_size_current} now, ${e.batch_size_max} max`],
    ['waiting', 'waiting requests', (e) => e.waiting, int, (e) => `${e.connections} connections`],
    ['kv-usage', 'KV cache in use', (e) => e.kv_cache_usage, pct, (e) => `${e.kv_blocks_used} / ${e.kv_blocks_total} blocks, peak ${e.kv_blocks_peak}`],
    ['prefix-hit', 'prefix-cache hit rate', (e) => e.prefix_cache_hit_rate, pct, (e) => `${e.prefix_cache_hits} / ${e.prefix_cache_queries} tokens`],
    ['preemptions', 'preemptions', (e) => e.preemptions, int, (e) => `${e.steps} engine steps`],
    ['step-ms', 'step time', (e) => (e.step_ms === null ? null : e.step_ms / 1000), ms, () => 'mean since the last update'],
    ['ttft-p50', 'TTFT p50', (e) => e.ttft.p50, ms, (e) => `p90 ${ms(e.ttft.p90)} · p99 ${ms(e.ttft.p99)} · ${e.ttft.n} req`],
    ['itl-p50', 'ITL p50', (e) => e.itl.p50, ms, (e) => `p90 ${ms(e.itl.p90)} · p99 ${ms(e.itl.p99)} · ${e.itl.n} tok`],
    ['finished', 'finished requests', (e) => Object.values(e.finished).reduce((a, b) => a + b, 0), int,
      (e) => Object.entries(e.finished).map(([k, v]) => `${k} ${v}`).join(' · ') || 'none yet'],
    ['aborted', 'aborted requests', (e) => e.finished.abort || 0, int, () => 'stopped or disconnected'],
  ];

  function buildCards() {
    const box = $('dash-cards');
    box.replaceChildren();
    for (const [id, label] of CARDS) {
      const c = md.el('div', 'card');
      const v = md.el('div', 'value', '–');
      v.id = 'dash-' + id;
      const sub = md.el('div', 'sub', '');
      sub.id = 'dash-' + id + '-sub';
      c.append(md.el('div', 'label', label), v, sub);
      box.append(c);
    }
  }

  function config(cfg) {
    const t = $('dash-config');
    t.replaceChildren();
    for (const [k, v] of Object.entries(cfg || {})) {
      const tr = md.el('tr');
      tr.append(md.el('td', null, k), md.el('td', null, String(v)));
      t.append(tr);
    }
  }

  function chart() {
    const max = Math.max(1, ...history.map((h) => Math.max(h.p, h.g)));
    const pts = (key) => history.map((h, i) => `${(600 * (i + HISTORY - history.length) / (HISTORY - 1)).toFixed(1)},${(118 - 114 * h[key] / max).toFixed(1)}`).join(' ');
    $('dash-line-prompt').setAttribute('points', pts('p'));
    $('dash-line-gen').setAttribute('points', pts('g'));
    $('dash-chart-max').textContent = `(top of the chart: ${max.toFixed(0)} tok/s)`;
  }

  function update(ev) {
    if (ev.config) config(ev.config);
    for (const [id, , value, fmt, sub] of CARDS) {
      const v = value(ev);
      const e = $('dash-' + id);
      e.textContent = fmt(v);
      e.dataset.value = v === null || v === undefined ? '' : String(v);
      $('dash-' + id + '-sub').textContent = sub(ev);
    }
    if (ev.prompt_tps !== null) {
      history.push({p: ev.prompt_tps, g: ev.generation_tps});
      if (history.length > HISTORY) history.shift();
      chart();
    }
    const panel = $('panel-dashboard');
    panel.dataset.seq = String(ev.seq);
    $('dash-state').textContent = ev.engine_dead ? 'engine failed' : ev.stopping ? 'server shutting down' : 'live';
    $('dash-updated').textContent = '· updated ' + new Date().toLocaleTimeString();
  }

  async function connect() {
    if (controller || !wanted) return;
    const ctl = new AbortController();
    controller = ctl;
    $('dash-state').textContent = 'connecting…';
    try {
      const res = await api.request('/v1/stats/stream', {signal: ctl.signal});
      if (res.status === 401) {  // no key given: wait for the user to come back to the tab
        $('dash-state').textContent = 'an API key is needed (button at the top)';
        return;
      }
      if (!res.ok) throw new Error(await api.errorText(res));
      retry = 0;
      for await (const ev of api.events(res)) update(ev);
      throw new Error('the server closed the stream');
    } catch (e) {
      if (ctl.signal.aborted) return;
      $('dash-state').textContent = 'disconnected (' + (e.message || e) + '); retrying';
    } finally {
      if (controller === ctl) controller = null;
    }
    if (!wanted || $('dash-state').textContent.startsWith('an API key')) return;
    retry = Math.min(retry + 1, 5);
    setTimeout(connect, 1000 * retry);
  }

  function disconnect() {
    if (controller) controller.abort();
    controller = null;
    if (!wanted) $('dash-state').textContent = 'paused (tab hidden)';
  }

  // Called by the tab switcher and on page visibility changes.
  function setActive(on) {
    wanted = on && document.visibilityState === 'visible';
    if (wanted) connect();
    else disconnect();
  }

  function init() {
    buildCards();
  }

  return {init, setActive};
})();
