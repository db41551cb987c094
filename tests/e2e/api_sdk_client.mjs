// The official OpenAI Node SDK (responses.*) and Anthropic Node SDK (messages.*) against
// `nanovllm serve` with an API key (run by test_api_sdks.py, which passes BASE_URL, API_KEY,
// MODEL, NPM_DIR, SCHEMA, TOOLS and reads our stdout). A random model writes garbage text, but
// every structure must hold: object shapes, the typed event streams (the SDKs' own stream
// accumulators validate order and identity), tool calls, constrained JSON, stored responses,
// background runs, count_tokens, errors in each API's shape. JSON documents are validated in
// Python (python3-jsonschema): printed as one line "DOCS <json>" at the end.
import { createRequire } from 'node:module';
import assert from 'node:assert/strict';

const require = createRequire(process.env.NPM_DIR + '/');
const oai = require('openai');
const OpenAI = oai.OpenAI ?? oai.default ?? oai;
const anth = require('@anthropic-ai/sdk');
const Anthropic = anth.Anthropic ?? anth.default ?? anth;
const base = process.env.BASE_URL;  // http://host:port
const openai = new OpenAI({ baseURL: base + '/v1', apiKey: process.env.API_KEY, maxRetries: 0, timeout: 120000 });
const anthropic = new Anthropic({ baseURL: base, apiKey: process.env.API_KEY, maxRetries: 0, timeout: 120000 });
const model = process.env.MODEL;
const schema = JSON.parse(process.env.SCHEMA);
const tools = JSON.parse(process.env.TOOLS);  // [{name, description, parameters}]
const docs = { schema: [], tool_args: [] };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function expectError(promise, status, check) {
  try {
    await promise;
  } catch (e) {
    assert.equal(e.status, status, `status ${e.status}: ${e.message}`);
    if (check) check(e);
    return e;
  }
  assert.fail(`expected HTTP ${status}`);
}

async function responses() {
  // Whole and streamed (seeded: the same text); the stream helper checks the event protocol.
  const req = { model, input: 'Tell me something.', instructions: 'Be brief.', max_output_tokens: 12, temperature: 1, seed: 5 };
  const whole = await openai.responses.create(req);
  assert.equal(whole.object, 'response');
  assert.ok(['completed', 'incomplete'].includes(whole.status));
  assert.equal(whole.instructions, 'Be brief.');
  assert.equal(whole.usage.total_tokens, whole.usage.input_tokens + whole.usage.output_tokens);
  assert.ok(whole.usage.output_tokens > 0 && whole.usage.output_tokens <= 12);
  if (whole.status === 'incomplete') assert.equal(whole.incomplete_details.reason, 'max_output_tokens');
  const types = [];
  const stream = openai.responses.stream(req);
  let seq = -1;
  for await (const ev of stream) {
    types.push(ev.type);
    assert.equal(ev.sequence_number, seq + 1, 'sequence numbers count up from 0');
    seq = ev.sequence_number;
  }
  const final = await stream.finalResponse();
  assert.equal(final.output_text, whole.output_text, 'streamed = whole (seeded)');
  assert.equal(types[0], 'response.created');
  assert.equal(types[1], 'response.in_progress');
  assert.ok(['response.completed', 'response.incomplete'].includes(types.at(-1)));
  if (whole.output_text) {
    for (const t of ['response.output_item.added', 'response.content_part.added', 'response.output_text.delta',
      'response.output_text.done', 'response.content_part.done', 'response.output_item.done'])
      assert.ok(types.includes(t), `stream has ${t}`);
  }

  // Stored: GET returns it; previous_response_id continues the conversation; DELETE forgets it.
  const got = await openai.responses.retrieve(whole.id);
  assert.equal(got.id, whole.id);
  assert.equal(got.output_text, whole.output_text);
  const next = await openai.responses.create({ model, previous_response_id: whole.id, input: 'And then?', max_output_tokens: 4 });
  assert.equal(next.previous_response_id, whole.id);
  assert.ok(next.usage.input_tokens > whole.usage.input_tokens, 'the follow-up prompt holds the first turn');
  await openai.responses.delete(next.id);
  await expectError(openai.responses.retrieve(next.id), 404);
  await expectError(openai.responses.create({ model, previous_response_id: 'resp_nope', input: 'x' }), 400,
    (e) => assert.equal(e.param, 'previous_response_id'));
  const unstored = await openai.responses.create({ model, input: 'x', max_output_tokens: 2, store: false });
  await expectError(openai.responses.retrieve(unstored.id), 404);

  // Input items: messages, a function call and its output, a reasoning item.
  const items = await openai.responses.create({
    model, max_output_tokens: 4, input: [
      { role: 'developer', content: 'Use tools.' },
      { role: 'user', content: [{ type: 'input_text', text: 'Weather in Paris?' }] },
      { type: 'reasoning', id: 'rs_1', summary: [{ type: 'summary_text', text: 'call the tool' }] },
      { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris","days":1}' },
      { type: 'function_call_output', call_id: 'call_1', output: 'sunny' },
    ], tools,
  });
  assert.ok(items.usage.input_tokens > 20);

  // Tools: tool_choice required, whole and streamed -> function_call items with valid arguments.
  for (let seed = 0; seed < 3; ++seed) {
    const r = await openai.responses.create({ model, input: 'Weather?', tools, tool_choice: 'required', max_output_tokens: 120, seed });
    const calls = r.output.filter((o) => o.type === 'function_call');
    assert.ok(calls.length >= 1, 'required: at least one call');
    // Chained calls cut by max_output_tokens: the cut one is 'incomplete', the others whole.
    if (r.status === 'completed') assert.ok(calls.every((x) => x.status === 'completed'));
    for (const c of calls.filter((x) => x.status === 'completed')) {
      assert.ok(c.call_id && c.id && c.id !== c.call_id);
      assert.ok(tools.some((t) => t.name === c.name), c.name);
      docs.tool_args.push({ name: c.name, arguments: c.arguments });
    }
  }
  const ts = openai.responses.stream({ model, input: 'Weather?', tools, tool_choice: { type: 'function', name: 'get_weather' }, max_output_tokens: 120, seed: 3 });
  let argDeltas = '';
  for await (const ev of ts) if (ev.type === 'response.function_call_arguments.delta') argDeltas += ev.delta;
  const tf = await ts.finalResponse();
  const call = tf.output.find((o) => o.type === 'function_call');
  assert.equal(call.name, 'get_weather');
  assert.equal(call.arguments, argDeltas, 'arguments = the concatenated deltas');
  docs.tool_args.push({ name: call.name, arguments: call.arguments });

  // text.format json_schema: the output text is a document of the schema.
  for (let seed = 0; seed < 5; ++seed) {
    const r = await openai.responses.create({ model, input: 'A person.', max_output_tokens: 200, seed,
      text: { format: { type: 'json_schema', name: 'person', schema, strict: true } } });
    assert.equal(r.status, 'completed', `json_schema seed ${seed} finished`);
    docs.schema.push(r.output_text);
  }

  // Background: queued at once, then polled to the end; cancel stops a long one.
  const bg = await openai.responses.create({ model, input: 'x', max_output_tokens: 8, background: true });
  assert.ok(['queued', 'in_progress'].includes(bg.status));
  let polled = bg;
  for (let i = 0; i < 200 && ['queued', 'in_progress'].includes(polled.status); ++i) {
    await sleep(50);
    polled = await openai.responses.retrieve(bg.id);
  }
  assert.ok(['completed', 'incomplete'].includes(polled.status), polled.status);
  assert.equal(polled.usage.output_tokens, 8);
  const long = await openai.responses.create({ model, input: 'x', max_output_tokens: 3500, background: true, temperature: 1, ignore_eos: true });
  const cancelled = await openai.responses.cancel(long.id);
  assert.equal(cancelled.status, 'cancelled');
  assert.ok(cancelled.usage.output_tokens < 3500);
  await expectError(openai.responses.cancel(whole.id), 400);

  // Errors in OpenAI's shape, naming the field.
  await expectError(openai.responses.create({ model, input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'x' }] }] }), 400,
    (e) => assert.match(e.message, /input_image/));
  await expectError(openai.responses.create({ model, input: 'x', tools: [{ type: 'web_search' }] }), 400,
    (e) => assert.equal(e.param, 'tools'));
  await expectError(openai.responses.create({ model, input: 'x', max_output_tokens: -1 }), 400,
    (e) => assert.equal(e.param, 'max_output_tokens'));
}

async function messages() {
  const msgs = [{ role: 'user', content: 'Tell me something.' }];
  // Whole and streamed (seed is vLLM's extra field: the same text).
  const req = { model, max_tokens: 12, messages: msgs, system: 'Be brief.', temperature: 1, seed: 5 };
  const whole = await anthropic.messages.create(req);
  assert.equal(whole.type, 'message');
  assert.equal(whole.role, 'assistant');
  assert.ok(['end_turn', 'max_tokens'].includes(whole.stop_reason));
  assert.ok(whole.usage.output_tokens > 0 && whole.usage.output_tokens <= 12);
  const text = whole.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
  const stream = anthropic.messages.stream(req);
  const order = [];
  stream.on('streamEvent', (ev) => order.push(ev.type));
  const final = await stream.finalMessage();
  assert.equal(final.content.filter((b) => b.type === 'text').map((b) => b.text).join(''), text, 'streamed = whole');
  assert.equal(final.stop_reason, whole.stop_reason);
  assert.equal(order[0], 'message_start');
  assert.equal(order.at(-1), 'message_stop');
  assert.equal(order.at(-2), 'message_delta');

  // count_tokens = the prompt the generation saw.
  const count = await anthropic.messages.countTokens({ model, messages: msgs, system: 'Be brief.' });
  assert.equal(count.input_tokens, whole.usage.input_tokens + (whole.usage.cache_read_input_tokens ?? 0));

  // stop_sequences: the first character of the text stops it at once.
  const long = await anthropic.messages.create({ model, max_tokens: 24, messages: msgs, temperature: 0, ignore_eos: true });
  const longText = long.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
  if (longText.length > 2) {
    const stopAt = longText.slice(1, 2);
    const stopped = await anthropic.messages.create({ model, max_tokens: 24, messages: msgs, temperature: 0, ignore_eos: true, stop_sequences: [stopAt] });
    assert.equal(stopped.stop_reason, 'stop_sequence');
    assert.equal(stopped.stop_sequence, stopAt);
  }

  // Tools: any -> tool_use blocks with object input, whole and streamed; then a tool_result turn.
  const atools = tools.map((t) => ({ name: t.name, description: t.description, input_schema: t.parameters }));
  for (let seed = 0; seed < 3; ++seed) {
    const r = await anthropic.messages.create({ model, max_tokens: 120, messages: msgs, tools: atools, tool_choice: { type: 'any' }, seed });
    const uses = r.content.filter((b) => b.type === 'tool_use');
    assert.ok(uses.length >= 1);
    // A random model may chain calls until max_tokens: then the last one is cut (its raw
    // arguments are kept in input._raw_arguments) and the others must be whole.
    assert.ok(['tool_use', 'max_tokens'].includes(r.stop_reason), r.stop_reason);
    if (r.stop_reason === 'max_tokens' && '_raw_arguments' in uses.at(-1).input) uses.pop();
    else assert.equal(r.stop_reason, 'tool_use');
    for (const u of uses) {
      assert.ok(u.id.startsWith('toolu_'));
      assert.equal(typeof u.input, 'object');
      docs.tool_args.push({ name: u.name, arguments: JSON.stringify(u.input) });
    }
  }
  const ts = anthropic.messages.stream({ model, max_tokens: 120, messages: msgs, tools: atools, tool_choice: { type: 'tool', name: 'get_weather' }, seed: 4 });
  const tm = await ts.finalMessage();
  const use = tm.content.find((b) => b.type === 'tool_use');
  assert.equal(use.name, 'get_weather');
  docs.tool_args.push({ name: use.name, arguments: JSON.stringify(use.input) });
  const turn = await anthropic.messages.create({ model, max_tokens: 4, tools: atools, messages: [
    ...msgs, { role: 'assistant', content: [{ type: 'text', text: 'Checking.' }, { type: 'tool_use', id: use.id, name: use.name, input: use.input }] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'sunny' }, { type: 'text', text: 'So?' }] },
  ] });
  assert.equal(turn.type, 'message');

  // Thinking on: accepted (a random model may or may not close its thinking).
  const th = await anthropic.messages.create({ model, max_tokens: 8, messages: msgs, thinking: { type: 'enabled', budget_tokens: 1024 } });
  for (const b of th.content) assert.ok(['thinking', 'text'].includes(b.type), b.type);

  // Errors in Anthropic's shape.
  const e1 = await expectError(anthropic.messages.create({ model, messages: msgs }), 400);
  assert.equal(e1.error.type, 'error');
  assert.equal(e1.error.error.type, 'invalid_request_error');
  assert.match(e1.error.error.message, /max_tokens/);
  const e2 = await expectError(anthropic.messages.create({ model, max_tokens: 4, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AA==' } }] }] }), 400);
  assert.match(e2.error.error.message, /image/);
  await expectError(anthropic.messages.create({ model: 'other-model', max_tokens: 4, messages: msgs }), 404,
    (e) => assert.equal(e.error.error.type, 'not_found_error'));
  const bad = new Anthropic({ baseURL: base, apiKey: 'wrong', maxRetries: 0 });
  await expectError(bad.messages.create({ model, max_tokens: 4, messages: msgs }), 401,
    (e) => assert.equal(e.error.error.type, 'authentication_error'));
}

// Grammars on the chat route: llama.cpp's `grammar` (GBNF), vLLM's `guided_grammar` and
// `structured_outputs.grammar` (GBNF / EBNF or Lark): every answer is in the language.
async function grammars() {
  const msgs = [{ role: 'user', content: 'Answer.' }];
  const gbnf = 'root ::= ("yes" | "no") " " [0-9]{1,3}';
  const lark = 'start: ANSWER " " NUM\nANSWER: "yes" | "no"\nNUM: /[0-9]{1,3}/';
  const cases = [['grammar', gbnf], ['guided_grammar', gbnf], ['structured_outputs', { grammar: gbnf }],
    ['structured_outputs', { grammar: lark }]];
  for (const [field, value] of cases) {
    for (let seed = 0; seed < 3; ++seed) {
      const r = await openai.chat.completions.create({ model, messages: msgs, max_tokens: 20, seed, [field]: value });
      const c = r.choices[0];
      assert.match(c.message.content, /^(yes|no) [0-9]{1,3}$/, `${field} seed ${seed}`);
      assert.equal(c.finish_reason, 'stop');
    }
  }
  // structural_tag (vLLM's response_format): free text, each trigger a tagged JSON structure.
  const tag = { type: 'structural_tag', triggers: ['<f='],
    structures: [{ begin: '<f=get>', schema: { type: 'object', properties: { n: { type: 'integer', minimum: 0, maximum: 9 } },
      required: ['n'], additionalProperties: false }, end: '</f>' }] };
  for (let seed = 0; seed < 3; ++seed) {
    const r = await openai.chat.completions.create({ model, messages: msgs, max_tokens: 24, seed, response_format: tag });
    const text = r.choices[0].message.content ?? '';
    for (const m of text.matchAll(/<f=get>([\s\S]*?)<\/f>/g)) assert.equal(typeof JSON.parse(m[1]).n, 'number');
    assert.ok(!text.replace(/<f=get>[\s\S]*?<\/f>/g, '').includes('<f=') || r.choices[0].finish_reason === 'length', text);
  }
  await expectError(openai.chat.completions.create({ model, messages: msgs, response_format: { type: 'structural_tag', triggers: ['<'], structures: [] } }), 400,
    (e) => assert.match(e.message, /structures/));
  await expectError(openai.chat.completions.create({ model, messages: msgs, grammar: 'root ::= "a"\nb ::= c' }), 400,
    (e) => assert.match(e.message, /line 2: rule 'c' is used but never defined/));
  await expectError(openai.chat.completions.create({ model, messages: msgs, structured_outputs: { grammar: 'start: /a/i' } }), 400,
    (e) => assert.match(e.message, /regex flags/));
}

async function main() {
  await responses();
  await messages();
  await grammars();
  console.log('DOCS ' + JSON.stringify(docs));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
