// The official OpenAI Node SDK against `nanovllm serve` (run by test_openai_sdk.py, which passes
// BASE_URL, MODEL, NPM_DIR and reads our stdout). A random model writes garbage text, but every
// structure must hold: shapes, indices, finish reasons, tool calls, constrained JSON. Schema
// validation of the JSON documents happens in Python (python3-jsonschema): they are printed as
// one line "DOCS <json>" at the end.
import { createRequire } from 'node:module';
import assert from 'node:assert/strict';

const require = createRequire(process.env.NPM_DIR + '/');
const sdk = require('openai');
const OpenAI = sdk.OpenAI ?? sdk.default ?? sdk;
const client = new OpenAI({ baseURL: process.env.BASE_URL, apiKey: 'none', maxRetries: 0, timeout: 120000 });
const model = process.env.MODEL;
const schema = JSON.parse(process.env.SCHEMA);
const tools = JSON.parse(process.env.TOOLS);
const msgs = [{ role: 'user', content: 'Tell me something.' }];
const docs = { schema: [], tool_args: [] };

async function collectChat(stream) {
  const out = new Map();  // index -> {content, reasoning, calls, finish}
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      if (!out.has(c.index)) out.set(c.index, { content: '', reasoning: '', calls: [], finish: null, lp: 0 });
      const o = out.get(c.index);
      if (c.delta?.content) o.content += c.delta.content;
      if (c.delta?.reasoning_content) o.reasoning += c.delta.reasoning_content;
      for (const tc of c.delta?.tool_calls ?? []) {
        if (!o.calls[tc.index]) o.calls[tc.index] = { id: tc.id, name: tc.function?.name ?? '', arguments: '' };
        assert.ok(o.calls[tc.index].id, 'first tool_call delta carries the id');
        o.calls[tc.index].arguments += tc.function?.arguments ?? '';
      }
      if (c.logprobs?.content) o.lp += c.logprobs.content.length;
      if (c.finish_reason) { assert.equal(o.finish, null, 'one finish per choice'); o.finish = c.finish_reason; }
    }
  }
  return out;
}

async function main() {
  // Chat, whole and streamed: the same seed gives the same text.
  const base = { model, messages: msgs, max_tokens: 12, temperature: 1, seed: 11 };
  const full = await client.chat.completions.create(base);
  assert.equal(full.object, 'chat.completion');
  assert.equal(full.choices.length, 1);
  assert.equal(typeof full.choices[0].message.content, 'string');
  assert.ok(['stop', 'length'].includes(full.choices[0].finish_reason));
  assert.equal(full.usage.total_tokens, full.usage.prompt_tokens + full.usage.completion_tokens);
  const streamed = await collectChat(await client.chat.completions.create({ ...base, stream: true }));
  assert.equal(streamed.get(0).content, full.choices[0].message.content, 'streamed = whole (seeded)');
  assert.equal(streamed.get(0).finish, full.choices[0].finish_reason);

  // n = 3, whole and streamed: indices 0..2, each finished; seeded = reproducible.
  const n3 = await client.chat.completions.create({ ...base, n: 3 });
  assert.deepEqual(n3.choices.map((c) => c.index), [0, 1, 2]);
  const n3b = await client.chat.completions.create({ ...base, n: 3 });
  assert.deepEqual(n3b.choices.map((c) => c.message.content), n3.choices.map((c) => c.message.content));
  const n3s = await collectChat(await client.chat.completions.create({ ...base, n: 3, stream: true }));
  assert.deepEqual([...n3s.keys()].sort(), [0, 1, 2]);
  for (const [i, o] of n3s) {
    assert.ok(o.finish, `choice ${i} finished`);
    assert.equal(o.content, n3.choices[i].message.content, `streamed choice ${i} = whole`);
  }

  // Logprobs with top_logprobs.
  const lp = await client.chat.completions.create({ ...base, logprobs: true, top_logprobs: 3 });
  const content = lp.choices[0].logprobs.content;
  assert.equal(content.length, lp.usage.completion_tokens);
  for (const t of content) {
    assert.equal(typeof t.token, 'string');
    assert.ok(t.logprob <= 0);
    assert.equal(t.top_logprobs.length, 3);
  }

  // Tools: auto (any output, valid shape) and required (calls of the declared tools).
  const auto = await client.chat.completions.create({ ...base, tools, tool_choice: 'auto' });
  assert.ok(['stop', 'length', 'tool_calls'].includes(auto.choices[0].finish_reason));
  for (const stream of [false, true]) {
    const req = { ...base, max_tokens: 400, tools, tool_choice: 'required', stream };
    let calls, finish;
    if (stream) {
      const o = (await collectChat(await client.chat.completions.create(req))).get(0);
      calls = o.calls; finish = o.finish;
    } else {
      const r = await client.chat.completions.create(req);
      calls = r.choices[0].message.tool_calls.map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments, type: c.type }));
      finish = r.choices[0].finish_reason;
      for (const c of calls) assert.equal(c.type, 'function');
    }
    assert.equal(finish, 'tool_calls');
    assert.ok(calls.length >= 1);
    assert.equal(new Set(calls.map((c) => c.id)).size, calls.length, 'distinct call ids');
    for (const c of calls) {
      const tool = tools.find((t) => t.function.name === c.name);
      assert.ok(tool, `called a declared tool: ${c.name}`);
      docs.tool_args.push({ tool: c.name, args: JSON.parse(c.arguments) });
    }
  }

  // Reasoning: the output is forced (regex) to think first; reasoning_content gets it.
  const think = { ...base, max_tokens: 60, structured_outputs: { regex: '<think>\\n[a-z]{1,6}\\n</think>\\n\\n[a-z]{1,6}' } };
  const tw = await client.chat.completions.create(think);
  assert.match(tw.choices[0].message.reasoning_content, /^[a-z]{1,6}$/);
  assert.match(tw.choices[0].message.content, /^[a-z]{1,6}$/);
  const ts = (await collectChat(await client.chat.completions.create({ ...think, stream: true }))).get(0);
  assert.equal(ts.reasoning, tw.choices[0].message.reasoning_content);
  assert.equal(ts.content, tw.choices[0].message.content);

  // response_format json_schema (strict): 100 requests, 16 at a time, unseeded.
  const rf = { type: 'json_schema', json_schema: { name: 'record', strict: true, schema } };
  for (let i = 0; i < 100; i += 16) {
    const batch = [];
    for (let k = i; k < Math.min(100, i + 16); ++k)
      batch.push(client.chat.completions.create({ model, messages: msgs, max_tokens: 600, response_format: rf }));
    for (const r of await Promise.all(batch)) {
      assert.equal(r.choices[0].finish_reason, 'stop', 'the grammar ended the output');
      docs.schema.push(JSON.parse(r.choices[0].message.content));
    }
  }

  // An unsupported schema feature is a 400 that names it.
  await assert.rejects(
    client.chat.completions.create({ model, messages: msgs, response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'number', multipleOf: 3 } } } }),
    (e) => e.status === 400 && /multipleOf/.test(e.message));

  // Completions, whole and streamed (same seed, same text); echo.
  const cbase = { model, prompt: 'Once upon a time', max_tokens: 10, seed: 5 };
  const cw = await client.completions.create(cbase);
  let ctext = '', cfinish = null;
  for await (const chunk of await client.completions.create({ ...cbase, stream: true })) {
    for (const c of chunk.choices) { ctext += c.text; if (c.finish_reason) cfinish = c.finish_reason; }
  }
  assert.equal(ctext, cw.choices[0].text);
  assert.equal(cfinish, cw.choices[0].finish_reason);
  const echo = await client.completions.create({ ...cbase, echo: true });
  assert.equal(echo.choices[0].text, 'Once upon a time' + cw.choices[0].text);
  await assert.rejects(client.completions.create({ ...cbase, suffix: 'x' }), (e) => e.status === 400 && /suffix/.test(e.message));

  // /tokenize and /detokenize round trip.
  const root = process.env.BASE_URL.replace(/\/v1$/, '');
  const tok = await (await fetch(root + '/tokenize', { method: 'POST', body: JSON.stringify({ model, prompt: 'hello world' }) })).json();
  assert.equal(tok.count, tok.tokens.length);
  const detok = await (await fetch(root + '/detokenize', { method: 'POST', body: JSON.stringify({ model, tokens: tok.tokens }) })).json();
  assert.equal(detok.prompt, 'hello world');

  console.log('DOCS ' + JSON.stringify(docs));
}

main().catch((e) => { console.error(e); process.exit(1); });
