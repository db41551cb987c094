'use strict';
// The completions tab: a raw prompt to /v1/completions (no chat template), streamed with
// logprobs and token ids (return_token_ids); every generated token is a box whose hover / focus
// shows its id, log-probability and the top alternatives. Token text goes in with textContent.
const completions = (() => {
  const $ = (id) => document.getElementById(id);
  let controller = null;
  let modelName = '';

  function status(text, error) {
    const s = $('comp-status');
    s.textContent = text || '';
    s.classList.toggle('error', !!error);
  }

  function sync() {
    $('comp-send').disabled = !!controller;
    $('comp-stop').disabled = !controller;
  }

  // Probability bucket -> background class: confident tokens green, unlikely ones red.
  function bucket(lp) {
    const p = Math.exp(lp);
    return p >= 0.9 ? 'p1' : p >= 0.5 ? 'p2' : p >= 0.1 ? 'p3' : 'p4';
  }

  function describe(t) {
    const lines = [`token ${JSON.stringify(t.text)}  id ${t.id === undefined ? '?' : t.id}`];
    if (typeof t.logprob === 'number')
      lines[0] += `  logprob ${t.logprob.toFixed(4)}  p ${Math.exp(t.logprob).toFixed(4)}`;
    if (t.top) {
      const alts = Object.entries(t.top).sort((a, b) => b[1] - a[1])
        .map(([k, v]) => `${JSON.stringify(k)} ${v.toFixed(3)}`);
      if (alts.length) lines.push('top: ' + alts.join('  '));
    }
    return lines.join('\n');
  }

  function tokenNode(t) {
    const s = md.el('span', 'tok', t.text);
    if (typeof t.logprob === 'number') s.classList.add(bucket(t.logprob));
    if (t.id !== undefined) s.dataset.id = String(t.id);
    if (typeof t.logprob === 'number') s.dataset.logprob = String(t.logprob);
    s.title = describe(t);
    s.tabIndex = 0;
    const show = () => { $('comp-detail').textContent = describe(t); };
    s.addEventListener('mouseenter', show);
    s.addEventListener('focus', show);
    return s;
  }

  function fields() {
    const out = {};
    const num = api.numberReader(out);
    num('c-max_tokens', 'max_tokens', true);
    num('c-temperature', 'temperature');
    num('c-seed', 'seed', true);
    num('c-top', 'logprobs', true);
    if (out.logprobs === undefined) out.logprobs = 0;
    return out;
  }

  async function generate() {
    if (controller) return;
    let f;
    try {
      f = fields();
    } catch (e) {
      status(e.message, true);
      return;
    }
    const prompt = $('comp-prompt').value;
    const body = Object.assign({prompt, stream: true, return_token_ids: true, stream_options: {include_usage: true}}, f);
    if (modelName) body.model = modelName;
    const out = $('comp-output');
    out.replaceChildren(md.el('span', 'prompt', prompt));
    out.dataset.state = 'streaming';
    $('comp-detail').textContent = '';
    const ctl = new AbortController();
    controller = ctl;
    sync();
    status('generating…');
    let n = 0;
    try {
      const res = await api.request('/v1/completions', {body, signal: ctl.signal});
      if (!res.ok) throw new Error(await api.errorText(res));
      for await (const ev of api.events(res)) {
        if (ev.error) throw new Error(ev.error.message || 'error');
        for (const c of ev.choices || []) {
          const lp = c.logprobs;
          const ids = c.token_ids || [];
          if (lp && lp.tokens) {
            lp.tokens.forEach((text, i) => {
              out.append(tokenNode({text, id: ids[i], logprob: lp.token_logprobs[i], top: lp.top_logprobs && lp.top_logprobs[i]}));
              n++;
            });
          } else if (c.text) {
            out.append(md.el('span', null, c.text));  // no logprobs: plain text
          }
          if (c.finish_reason) out.dataset.finish = c.finish_reason;
        }
      }
      out.dataset.state = 'done';
      status(`${n} token${n === 1 ? '' : 's'}` + (out.dataset.finish ? ` · finish: ${out.dataset.finish}` : ''));
    } catch (e) {
      out.dataset.state = ctl.signal.aborted ? 'stopped' : 'error';
      status(ctl.signal.aborted ? `stopped after ${n} tokens` : String(e.message || e), !ctl.signal.aborted);
    } finally {
      controller = null;
      sync();
    }
  }

  function init(model) {
    modelName = model || '';
    $('comp-form').addEventListener('submit', (ev) => { ev.preventDefault(); generate(); });
    $('comp-prompt').addEventListener('keydown', (ev) => {
      if (ev.key === 'Enter' && (ev.ctrlKey || ev.metaKey)) { ev.preventDefault(); generate(); }
    });
    $('comp-stop').addEventListener('click', () => { if (controller) controller.abort(); });
    sync();
  }

  return {init, stop: () => { if (controller) controller.abort(); }, busy: () => !!controller,
    setModel: (m) => { modelName = m; }};
})();
