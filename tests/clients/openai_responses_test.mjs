// Drives gantry serve's OpenAI Responses API (POST/GET/DELETE /v1/responses) with the official `openai`
// client pinned in package.json (responses.create / stream / retrieve / delete). Usage:
//   BASE_URL=http://127.0.0.1:PORT/v1 MODEL=tiny-llama TOOL_MODELS=tiny-llama,tiny-qwen25-tools \
//     node tests/clients/openai_responses_test.mjs
// Each check prints "ok <name>"; the first failure prints "FAIL ..." and the exit code is 1. The models
// have random weights: a forced tool call is bounded by the grammar (the only parameter is an enum), and
// text is only checked for what must hold (it concatenates, it has a status, it is counted).
import assert from 'node:assert/strict';
import OpenAI, { APIError } from 'openai';

const env = process.env;
const baseURL = (env.BASE_URL ?? 'http://127.0.0.1:8080/v1').replace(/\/+$/, '');
const MODEL = env.MODEL ?? 'tiny-llama';
const TOOL_MODELS = (env.TOOL_MODELS ?? MODEL).split(',').filter(Boolean);
const apiKey = env.API_KEY || 'none';
const TIMEOUT_S = Number(env.TEST_TIMEOUT_S ?? 240);
const MAX_TOKENS = 256;
const CITIES = ['Paris', 'London'];

const watchdog = setTimeout(() => {
  console.error(`FAIL timeout: the checks did not finish within ${TIMEOUT_S} s`);
  process.exit(1);
}, TIMEOUT_S * 1000);

const openai = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60_000 });

const tools = [
  {
    type: 'function',
    name: 'get_weather',
    description: 'The current weather of a city',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string', enum: CITIES } },
      required: ['city'],
      additionalProperties: false,
    },
    strict: true,
  },
];

async function check(name, fn) {
  try {
    await fn();
    console.log(`ok ${name}`);
  } catch (e) {
    console.error(`FAIL ${name}: ${e?.stack ?? e}`);
    process.exit(1);
  }
}

async function expectError(what, status, param, fn) {
  try {
    await fn();
  } catch (e) {
    assert.ok(e instanceof APIError, `${what}: not an APIError: ${e}`);
    assert.equal(e.status, status, `${what}: status ${e.status}, want ${status} (${e.message})`);
    assert.equal(e.param, param, `${what}: param ${JSON.stringify(e.param)}, want ${param} (${e.message})`);
    return e;
  }
  assert.fail(`${what}: the request was accepted`);
}

function checkResponse(r, model, what) {
  assert.equal(r.object, 'response', `${what}: object ${r.object}`);
  assert.match(r.id, /^resp_/, `${what}: id ${r.id}`);
  assert.equal(r.model, model);
  assert.ok(Number.isInteger(r.created_at) && r.created_at > 0, `${what}: created_at ${r.created_at}`);
  assert.ok(['completed', 'incomplete'].includes(r.status), `${what}: status ${r.status}`);
  if (r.status === 'incomplete') {
    assert.equal(r.incomplete_details?.reason, 'max_output_tokens', `${what}: incomplete_details`);
  }
  assert.ok(r.usage.input_tokens > 0, `${what}: input_tokens ${r.usage.input_tokens}`);
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens, `${what}: total_tokens`);
  const cached = r.usage.input_tokens_details.cached_tokens;  // a repeated prompt comes from the cache
  assert.ok(Number.isInteger(cached) && cached >= 0 && cached < r.usage.input_tokens, `${what}: cached_tokens ${cached}`);
  assert.ok(Number.isInteger(r.usage.output_tokens_details.reasoning_tokens));
}

// The text of the message items, as the client's output_text convenience joins them.
function messageText(r) {
  return r.output
    .filter((i) => i.type === 'message')
    .flatMap((i) => i.content)
    .filter((c) => c.type === 'output_text')
    .map((c) => c.text)
    .join('');
}

function functionCall(r, what) {
  const calls = r.output.filter((i) => i.type === 'function_call');
  assert.ok(calls.length >= 1, `${what}: no function_call item: ${JSON.stringify(r.output)}`);
  const c = calls[0];
  assert.equal(c.name, 'get_weather');
  assert.ok(c.call_id, `${what}: the call has no call_id`);
  assert.match(c.id, /^fc_/);
  const args = JSON.parse(c.arguments);
  assert.ok(CITIES.includes(args.city), `${what}: the call's city is ${JSON.stringify(args.city)}`);
  return c;
}

const prompt = 'What is the weather in Paris?';

await check('responses.create plain', async () => {
  const r = await openai.responses.create({ model: MODEL, input: 'Say hello.', max_output_tokens: 8, temperature: 0 });
  checkResponse(r, MODEL, 'plain');
  assert.ok(r.usage.output_tokens >= 1 && r.usage.output_tokens <= 8, `output_tokens ${r.usage.output_tokens}`);
  const messages = r.output.filter((i) => i.type === 'message');
  assert.equal(messages.length, 1, `one message item: ${JSON.stringify(r.output)}`);
  assert.equal(messages[0].role, 'assistant');
  assert.match(messages[0].id, /^msg_/);
  assert.deepEqual(messages[0].content[0].annotations, []);
  assert.equal(r.output_text, messageText(r), 'output_text is not the message text');
  assert.equal(r.store, true);
  assert.equal(r.max_output_tokens, 8);
});

await check('responses.create instructions, items and metadata', async () => {
  const r = await openai.responses.create({
    model: MODEL,
    instructions: 'You are terse.',
    input: [
      { role: 'user', content: 'Hi' },
      { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Hello.' }] },
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Count to three.' }] },
    ],
    metadata: { run: 'test' },
    max_output_tokens: 8,
  });
  checkResponse(r, MODEL, 'items');
  assert.equal(r.instructions, 'You are terse.');
  assert.deepEqual(r.metadata, { run: 'test' });
});

await check('responses.create stream: events in order, deltas make the text', async () => {
  const stream = await openai.responses.create({ model: MODEL, input: 'Tell a story.', max_output_tokens: 12, stream: true });
  const events = [];
  for await (const e of stream) events.push(e);
  const types = events.map((e) => e.type);
  assert.deepEqual(types.slice(0, 2), ['response.created', 'response.in_progress']);
  const last = events.at(-1);
  assert.ok(['response.completed', 'response.incomplete'].includes(last.type), `last event ${last.type}`);
  events.forEach((e, i) => assert.equal(e.sequence_number, i, `sequence_number of event ${i} (${e.type})`));
  const order = [
    'response.output_item.added',
    'response.content_part.added',
    'response.output_text.delta',
    'response.output_text.done',
    'response.content_part.done',
    'response.output_item.done',
  ];
  let at = 0;
  for (const t of types) if (t === order[at]) at++;
  assert.equal(at, order.length, `the message events are not in order: ${types.join(', ')}`);
  const deltas = events.filter((e) => e.type === 'response.output_text.delta');
  assert.ok(deltas.length >= 1, 'no output_text.delta');
  const added = events.find((e) => e.type === 'response.output_item.added');
  for (const d of deltas) assert.equal(d.item_id, added.item.id, 'a delta names another item');
  const text = deltas.map((d) => d.delta).join('');
  assert.equal(events.find((e) => e.type === 'response.output_text.done').text, text);
  const final = last.response;
  checkResponse(final, MODEL, 'streamed');
  assert.equal(messageText(final), text, 'the final response is not the concatenated deltas');
  assert.equal(final.usage.output_tokens >= 1, true);
});

await check('responses.stream helper: finalResponse matches the deltas', async () => {
  const stream = openai.responses.stream({ model: MODEL, input: 'Describe the sea.', max_output_tokens: 10 });
  let text = '';
  stream.on('response.output_text.delta', (e) => {
    text += e.delta;
  });
  const final = await stream.finalResponse();
  checkResponse(final, MODEL, 'stream helper');
  assert.equal(final.output_text, text);
});

await check('GET and DELETE /v1/responses/{id}; store false is not kept', async () => {
  const r = await openai.responses.create({ model: MODEL, input: 'Hi', max_output_tokens: 4 });
  const got = await openai.responses.retrieve(r.id);
  assert.equal(got.id, r.id);
  assert.deepEqual(got.output, r.output);
  await openai.responses.delete(r.id);
  await expectError('retrieve deleted', 404, 'response_id', () => openai.responses.retrieve(r.id));
  await expectError('delete deleted', 404, 'response_id', () => openai.responses.delete(r.id));
  const unstored = await openai.responses.create({ model: MODEL, input: 'Hi', max_output_tokens: 4, store: false });
  assert.equal(unstored.store, false);
  await expectError('retrieve store:false', 404, 'response_id', () => openai.responses.retrieve(unstored.id));
  await expectError('continue store:false', 404, 'previous_response_id', () =>
    openai.responses.create({ model: MODEL, input: 'more', previous_response_id: unstored.id }),
  );
});

for (const model of TOOL_MODELS) {
  await check(`${model} function call round trip with previous_response_id`, async () => {
    const r1 = await openai.responses.create({
      model,
      input: prompt,
      tools,
      tool_choice: 'required',
      parallel_tool_calls: false,
      temperature: 0,
      max_output_tokens: MAX_TOKENS,
    });
    checkResponse(r1, model, 'call');
    assert.equal(r1.status, 'completed', `the forced call did not complete: ${JSON.stringify(r1.output)}`);
    const call = functionCall(r1, 'call');
    assert.equal(r1.tools[0].name, 'get_weather');
    assert.equal(r1.tool_choice, 'required');

    const r2 = await openai.responses.create({
      model,
      previous_response_id: r1.id,
      input: [{ type: 'function_call_output', call_id: call.call_id, output: JSON.stringify({ temperature_c: 21 }) }],
      tools,
      tool_choice: 'none',
      max_output_tokens: 16,
    });
    checkResponse(r2, model, 'answer');
    assert.equal(r2.previous_response_id, r1.id);
    assert.equal(r2.output.filter((i) => i.type === 'function_call').length, 0, 'tool_choice none called a tool');
    assert.equal(r2.output.filter((i) => i.type === 'message').length, 1);
  });

  await check(`${model} function call streamed, then the whole history with store false`, async () => {
    const stream = openai.responses.stream({
      model,
      input: prompt,
      tools,
      tool_choice: { type: 'function', name: 'get_weather' },
      parallel_tool_calls: false,
      temperature: 0,
      max_output_tokens: MAX_TOKENS,
      store: false,
    });
    let args = '';
    let done;
    stream.on('response.function_call_arguments.delta', (e) => {
      args += e.delta;
    });
    stream.on('response.function_call_arguments.done', (e) => {
      done = e.arguments;
    });
    const r1 = await stream.finalResponse();
    checkResponse(r1, model, 'streamed call');
    const call = functionCall(r1, 'streamed call');
    assert.equal(args, call.arguments, 'the argument deltas do not make the arguments');
    assert.equal(done, call.arguments);

    // Codex-style: no stored state, the client sends the call and its output back.
    const r2 = await openai.responses.create({
      model,
      input: [
        { role: 'user', content: prompt },
        { type: 'function_call', call_id: call.call_id, name: call.name, arguments: call.arguments },
        { type: 'function_call_output', call_id: call.call_id, output: 'sunny, 21 C' },
      ],
      tools,
      max_output_tokens: 16,
      store: false,
    });
    checkResponse(r2, model, 'history answer');
  });
}

await check('text.format json_schema', async () => {
  const r = await openai.responses.create({
    model: MODEL,
    input: 'Is the sky blue? Answer in JSON.',
    text: {
      format: {
        type: 'json_schema',
        name: 'answer',
        strict: true,
        schema: {
          type: 'object',
          properties: { answer: { type: 'string', enum: ['yes', 'no'] } },
          required: ['answer'],
          additionalProperties: false,
        },
      },
    },
    temperature: 0,
    max_output_tokens: MAX_TOKENS,
  });
  checkResponse(r, MODEL, 'json_schema');
  assert.equal(r.status, 'completed', `the constrained answer did not complete: ${r.output_text}`);
  assert.ok(['yes', 'no'].includes(JSON.parse(r.output_text).answer), `not the schema: ${r.output_text}`);
  assert.equal(r.text.format.type, 'json_schema');
});

await check('errors: unknown previous_response_id, bad tools, images', async () => {
  const e = await expectError('unknown previous_response_id', 404, 'previous_response_id', () =>
    openai.responses.create({ model: MODEL, input: 'Hi', previous_response_id: 'resp_doesnotexist' }),
  );
  assert.equal(e.type, 'invalid_request_error');
  await expectError('a tool that is not a function', 400, 'tools[0].type', () =>
    openai.responses.create({ model: MODEL, input: 'Hi', tools: [{ type: 'web_search' }] }),
  );
  await expectError('a function without a name', 400, 'tools[0].name', () =>
    openai.responses.create({ model: MODEL, input: 'Hi', tools: [{ type: 'function', parameters: {} }] }),
  );
  await expectError('parameters not a schema', 400, 'tools[0].parameters', () =>
    openai.responses.create({ model: MODEL, input: 'Hi', tools: [{ type: 'function', name: 'f', parameters: 'x' }] }),
  );
  await expectError('a bad function name', 400, 'tools[0].name', () =>
    openai.responses.create({ model: MODEL, input: 'Hi', tools: [{ type: 'function', name: 'no spaces' }] }),
  );
  await expectError('tool_choice naming an undeclared function', 400, 'tool_choice', () =>
    openai.responses.create({ model: MODEL, input: 'Hi', tools, tool_choice: { type: 'function', name: 'nope' } }),
  );
  await expectError('an image part', 400, 'input[0].content[1].type', () =>
    openai.responses.create({
      model: MODEL,
      input: [
        {
          role: 'user',
          content: [
            { type: 'input_text', text: 'What is this?' },
            { type: 'input_image', image_url: 'https://example.com/a.png' },
          ],
        },
      ],
    }),
  );
  await expectError('an output for no call', 400, 'input', () =>
    openai.responses.create({ model: MODEL, input: [{ type: 'function_call_output', call_id: 'call_x', output: 'x' }] }),
  );
  await expectError('an unknown model', 404, 'model', () => openai.responses.create({ model: 'nope', input: 'Hi' }));
  // Refused when the generation starts: a plain 400, streamed or not, naming the format.
  const huge = { type: 'string', enum: Array.from({ length: 2000 }, (_, i) => `v${i}`) };
  await expectError('a schema too large, streamed', 400, 'text.format', () =>
    openai.responses.create({
      model: MODEL,
      input: 'Hi',
      stream: true,
      text: { format: { type: 'json_schema', name: 'huge', schema: huge } },
    }),
  );
});

clearTimeout(watchdog);
console.log('all Responses API checks passed');
