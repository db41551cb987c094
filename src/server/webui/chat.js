'use strict';
// The chat tab: a conversation streamed from /v1/chat/completions. Reasoning goes in a collapsed
// <details>, the answer through md.render (no model text is ever parsed as HTML), tool calls as
// text. Stop aborts the fetch: the server sees the connection close and aborts the request.
const chat = (() => {
  const $ = (id) => document.getElementById(id);
  let messages = [];      // {role, content, reasoning, tool_calls, meta, state}
  let controller = null;  // the request in flight
  let modelName = '';

  // --- rendering ---

  function messageNode(msg) {
    const node = md.el('div', 'msg ' + msg.role);
    node.dataset.role = msg.role;
    node.append(md.el('div', 'role', msg.role));
    msg.node = node;
    updateNode(msg);
    return node;
  }

  // (Re)renders one message's content into its node; the reasoning <details> keeps its state.
  function updateNode(msg) {
    const node = msg.node;
    if (!node) return;
    node.dataset.state = msg.state || 'done';
    node.dataset.chunks = String(msg.chunks || 0);
    if (msg.reasoning) {
      let det = node.querySelector('details.reasoning');
      if (!det) {
        det = md.el('details', 'reasoning');
        det.append(md.el('summary'), md.el('div', 'text'));
        node.querySelector('.role').after(det);
      }
      det.querySelector('summary').textContent = msg.state === 'streaming' && !msg.content ? 'Thinking…' : 'Reasoning';
      det.querySelector('.text').textContent = msg.reasoning;
    }
    let body = node.querySelector('.body');
    if (!body) {
      body = md.el('div', 'body');
      node.append(body);
    }
    if (msg.role === 'assistant') body.replaceChildren(md.render(msg.content || ''));
    else body.textContent = msg.content || '';
    node.querySelectorAll('.tool-call').forEach((e) => e.remove());
    for (const tc of msg.tool_calls || []) {
      const box = md.el('div', 'tool-call');
      box.append(md.el('strong', null, 'tool call '), md.el('code', null, tc.function.name || '?'));
      box.append(md.el('pre', null, tc.function.arguments || ''));
      body.after(box);
    }
    let meta = node.querySelector('.meta');
    if (msg.meta) {
      if (!meta) {
        meta = md.el('div', 'meta');
        node.append(meta);
      }
      meta.textContent = msg.meta;
      meta.classList.toggle('error', msg.state === 'error');
    } else if (meta) {
      meta.remove();
    }
  }

  function renderAll() {
    const box = $('messages');
    box.replaceChildren();
    if (!messages.length) {
      const p = md.el('p', 'hint', 'Ask something. Enter sends, Shift+Enter starts a new line, Esc stops the answer.');
      p.id = 'chat-empty';
      box.append(p);
    }
    for (const m of messages) box.append(messageNode(m));
    box.scrollTop = box.scrollHeight;
    syncButtons();
  }

  function syncButtons() {
    const busy = !!controller;
    $('chat-send').disabled = busy;
    $('chat-stop').disabled = !busy;
    $('chat-regen').disabled = busy || !messages.some((m) => m.role === 'user');
    $('chat-import').disabled = busy;
  }

  function status(text, error) {
    const s = $('chat-status');
    s.textContent = text || '';
    s.classList.toggle('error', !!error);
  }

  // --- the request ---

  // Sampling fields from the settings; throws Error with a message for the user.
  function requestFields() {
    const out = {};
    const num = api.numberReader(out);
    num('p-temperature', 'temperature');
    num('p-top_p', 'top_p');
    num('p-top_k', 'top_k', true);
    num('p-min_p', 'min_p');
    num('p-max_tokens', 'max_tokens', true);
    num('p-seed', 'seed', true);
    if (!$('p-thinking').checked) out.chat_template_kwargs = {enable_thinking: false};
    const fmt = $('p-format').value;
    if (fmt === 'json_object') out.response_format = {type: 'json_object'};
    if (fmt === 'json_schema') {
      let schema;
      try { schema = JSON.parse($('p-schema').value); } catch (e) { throw new Error('the JSON schema is not valid JSON: ' + e.message); }
      out.response_format = {type: 'json_schema', json_schema: {name: 'schema', schema}};
    }
    const tools = $('p-tools').value.trim();
    if (tools) {
      let t;
      try { t = JSON.parse(tools); } catch (e) { throw new Error('the tools are not valid JSON: ' + e.message); }
      if (!Array.isArray(t)) throw new Error('tools must be a JSON array');
      out.tools = t;
    }
    return out;
  }

  function wireMessages() {
    const out = [];
    const sys = $('system-prompt').value;
    if (sys.trim()) out.push({role: 'system', content: sys});
    for (const m of messages) {
      if (m.state === 'error' && !m.content) continue;
      const w = {role: m.role, content: m.content || ''};
      if (m.tool_calls && m.tool_calls.length) w.tool_calls = m.tool_calls;
      out.push(w);
    }
    return out;
  }

  async function generate() {
    let fields;
    try {
      fields = requestFields();
    } catch (e) {
      status(e.message, true);
      return;
    }
    const body = Object.assign({messages: wireMessages(), stream: true, stream_options: {include_usage: true}}, fields);
    if (modelName) body.model = modelName;
    const msg = {role: 'assistant', content: '', reasoning: '', tool_calls: [], state: 'streaming', chunks: 0};
    messages.push(msg);
    $('messages').append(messageNode(msg));
    const ctl = new AbortController();
    controller = ctl;
    syncButtons();
    status('generating…');
    const t0 = performance.now();
    let tFirst = 0, timer = 0;
    const paint = () => {
      timer = 0;
      updateNode(msg);
      const box = $('messages');
      box.scrollTop = box.scrollHeight;
    };
    try {
      const res = await api.request('/v1/chat/completions', {body, signal: ctl.signal});
      if (!res.ok) throw new Error(await api.errorText(res));
      for await (const ev of api.events(res)) {
        if (ev.error) throw new Error(ev.error.message || 'error');
        if (ev.usage) msg.usage = ev.usage;
        for (const c of ev.choices || []) {
          const d = c.delta || {};
          if (!tFirst && (d.content || d.reasoning_content || d.tool_calls)) tFirst = performance.now();
          if (d.reasoning_content) msg.reasoning += d.reasoning_content;
          if (d.content) msg.content += d.content;
          for (const tc of d.tool_calls || []) {
            const slot = msg.tool_calls[tc.index] || (msg.tool_calls[tc.index] = {id: '', type: 'function', function: {name: '', arguments: ''}});
            if (tc.id) slot.id = tc.id;
            if (tc.function && tc.function.name) slot.function.name += tc.function.name;
            if (tc.function && tc.function.arguments) slot.function.arguments += tc.function.arguments;
          }
          if (c.finish_reason) msg.finish = c.finish_reason;
        }
        msg.chunks++;
        if (!timer) timer = setTimeout(paint, 30);
      }
      msg.state = 'done';
      const secs = (performance.now() - (tFirst || t0)) / 1000;
      const n = msg.usage ? msg.usage.completion_tokens : 0;
      msg.meta = [n ? `${n} tokens` : '', n > 1 && secs > 0.05 ? `${(n / secs).toFixed(1)} tok/s` : '',
        tFirst ? `first token ${((tFirst - t0) / 1000).toFixed(2)} s` : '', msg.finish ? `finish: ${msg.finish}` : '']
        .filter(Boolean).join(' · ');
      status('');
    } catch (e) {
      if (ctl.signal.aborted) {
        msg.state = 'stopped';
        msg.meta = 'stopped';
        status('stopped');
      } else {
        msg.state = 'error';
        msg.meta = String(e.message || e);
        status('request failed', true);
      }
    } finally {
      clearTimeout(timer);
      msg.tool_calls = msg.tool_calls.filter(Boolean);
      controller = null;
      updateNode(msg);
      $('messages').scrollTop = $('messages').scrollHeight;
      syncButtons();
    }
  }

  function send() {
    if (controller) return;
    const input = $('chat-input');
    const text = input.value;
    if (!text.trim()) return;
    input.value = '';
    const empty = $('chat-empty');
    if (empty) empty.remove();
    const m = {role: 'user', content: text};
    messages.push(m);
    $('messages').append(messageNode(m));
    generate();
  }

  function stop() {
    if (controller) controller.abort();
  }

  // Drops the answers after the last user message and asks again.
  function regenerate() {
    if (controller) return;
    while (messages.length && messages[messages.length - 1].role !== 'user') messages.pop();
    if (!messages.length) return;
    renderAll();
    generate();
  }

  // --- export / import ---

  function settings() {
    const s = {};
    for (const id of ['p-temperature', 'p-top_p', 'p-top_k', 'p-min_p', 'p-max_tokens', 'p-seed', 'p-format', 'p-schema', 'p-tools'])
      s[id.slice(2)] = $(id).value;
    s.thinking = $('p-thinking').checked;
    return s;
  }

  function exportChat() {
    const data = {
      format: 'nanovllm-chat', version: 1, model: modelName, system: $('system-prompt').value, settings: settings(),
      messages: messages.map((m) => {
        const o = {role: m.role, content: m.content || ''};
        if (m.reasoning) o.reasoning_content = m.reasoning;
        if (m.tool_calls && m.tool_calls.length) o.tool_calls = m.tool_calls;
        return o;
      }),
    };
    const blob = new Blob([JSON.stringify(data, null, 2)], {type: 'application/json'});
    const a = md.el('a');
    a.href = URL.createObjectURL(blob);
    a.download = 'chat-' + new Date().toISOString().replace(/[:.]/g, '-') + '.json';
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 1000);
  }

  // Accepts what exportChat writes (or a bare {messages: [...]}); checks every field's type.
  function importChat(text) {
    const data = JSON.parse(text);
    if (!data || !Array.isArray(data.messages)) throw new Error('no "messages" array');
    const out = data.messages.map((m, i) => {
      if (!m || !['user', 'assistant', 'system', 'tool'].includes(m.role)) throw new Error(`message ${i}: bad role`);
      if (typeof (m.content || '') !== 'string') throw new Error(`message ${i}: content must be a string`);
      const o = {role: m.role, content: m.content || '', state: 'done'};
      if (typeof m.reasoning_content === 'string') o.reasoning = m.reasoning_content;
      if (Array.isArray(m.tool_calls)) {
        o.tool_calls = m.tool_calls.filter((t) => t && t.function && typeof t.function.name === 'string')
          .map((t) => ({id: String(t.id || ''), type: 'function',
            function: {name: t.function.name, arguments: String(t.function.arguments || '')}}));
      }
      return o;
    });
    if (typeof data.system === 'string') $('system-prompt').value = data.system;
    const s = data.settings || {};
    for (const k of ['temperature', 'top_p', 'top_k', 'min_p', 'max_tokens', 'seed', 'format', 'schema', 'tools'])
      if (typeof s[k] === 'string') $('p-' + k).value = s[k];
    if (typeof s.thinking === 'boolean') $('p-thinking').checked = s.thinking;
    $('p-schema').hidden = $('p-format').value !== 'json_schema';
    messages = out;
    renderAll();
  }

  function init(model) {
    modelName = model || '';
    $('chat-form').addEventListener('submit', (ev) => { ev.preventDefault(); send(); });
    $('chat-input').addEventListener('keydown', (ev) => {
      if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
        ev.preventDefault();
        send();
      }
    });
    $('chat-stop').addEventListener('click', stop);
    $('chat-regen').addEventListener('click', regenerate);
    $('chat-new').addEventListener('click', () => {
      stop();
      messages = [];
      renderAll();
      status('');
    });
    $('p-format').addEventListener('change', () => { $('p-schema').hidden = $('p-format').value !== 'json_schema'; });
    $('chat-export').addEventListener('click', exportChat);
    $('chat-import').addEventListener('click', () => $('chat-import-file').click());
    $('chat-import-file').addEventListener('change', async (ev) => {
      const f = ev.target.files[0];
      ev.target.value = '';
      if (!f) return;
      try {
        importChat(await f.text());
        status('imported ' + f.name);
      } catch (e) {
        status('import failed: ' + e.message, true);
      }
    });
    renderAll();
  }

  return {init, send, stop, busy: () => !!controller, importChat, setModel: (m) => { modelName = m; }};
})();
