// Drives gantry serve's Anthropic Messages API (POST /v1/messages, /v1/messages/count_tokens) with the
// official client, @anthropic-ai/sdk (pinned in package.json), as Claude-API tools use it. Usage:
//   BASE_URL=http://127.0.0.1:PORT MODELS=a,b API_KEY=k node tests/clients/anthropic_client_test.mjs
// Each model is checked in turn: plain and streamed messages, tool_use forced by tool_choice "any" and by
// a named tool, a multi-turn with a tool_result, count_tokens, and 400s naming the field. Each check
// prints "ok <model> <name>"; the first failure prints "FAIL ..." and the exit code is 1. The models have
// random weights, so the tool's only parameter is an enum: the grammar bounds every call and a forced
// call always completes.
import assert from 'node:assert/strict';
import Anthropic, { APIError, AuthenticationError, BadRequestError, NotFoundError } from '@anthropic-ai/sdk';

const env = process.env;
const baseURL = (env.BASE_URL ?? 'http://127.0.0.1:8080').replace(/\/+$/, '');
const MODELS = (env.MODELS ?? '').split(',').filter(Boolean);
const apiKey = env.API_KEY || 'none';
const TIMEOUT_S = Number(env.TEST_TIMEOUT_S ?? 240);
const MAX_TOKENS = 256;
const CITIES = ['Paris', 'London'];

if (MODELS.length === 0) {
  console.error('FAIL setup: MODELS is not set');
  process.exit(2);
}
const watchdog = setTimeout(() => {
  console.error(`FAIL timeout: the checks did not finish within ${TIMEOUT_S} s`);
  process.exit(1);
}, TIMEOUT_S * 1000);

const client = new Anthropic({ baseURL, apiKey, maxRetries: 0, timeout: 60_000 });

const tools = [
  {
    name: 'get_weather',
    description: 'The current weather of a city',
    input_schema: { type: 'object', properties: { city: { type: 'string', enum: CITIES } }, required: ['city'] },
  },
  {
    name: 'get_time',
    description: 'The local time of a city',
    input_schema: { type: 'object', properties: { city: { type: 'string', enum: CITIES } }, required: ['city'] },
  },
];
const prompt = 'What is the weather in Paris?';

async function check(model, name, fn) {
  try {
    await fn();
    console.log(`ok ${model} ${name}`);
  } catch (e) {
    console.error(`FAIL ${model} ${name}: ${e?.stack ?? e}`);
    process.exit(1);
  }
}

// Asserts the request is refused with a 400 invalid_request_error whose message starts with `field`.
async function expect400(what, field, body) {
  try {
    await client.messages.create(body);
  } catch (e) {
    assert.ok(e instanceof BadRequestError, `${what}: not a BadRequestError: ${e}`);
    assert.equal(e.status, 400, `${what}: status ${e.status}`);
    assert.equal(e.type, 'invalid_request_error', `${what}: error type ${e.type}`);
    assert.ok(e.apiMessage?.startsWith(`${field}: `), `${what}: the message does not name ${field}: ${e.apiMessage}`);
    return;
  }
  assert.fail(`${what}: the request was accepted`);
}

function textOf(message) {
  return message.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
}

// The message's single tool_use block, checked: a get_weather/get_time call with an object input whose
// city is one of the enum, an Anthropic-style id, and stop_reason "tool_use".
function checkToolUse(message, name, what) {
  const calls = message.content.filter((b) => b.type === 'tool_use');
  assert.equal(calls.length, 1, `${what}: ${calls.length} tool_use blocks: ${JSON.stringify(message.content)}`);
  const call = calls[0];
  assert.equal(call.name, name, `${what}: called ${call.name}`);
  assert.match(call.id, /^toolu_[A-Za-z0-9]+$/, `${what}: id ${call.id}`);
  assert.ok(call.input && typeof call.input === 'object' && !Array.isArray(call.input), `${what}: input ${JSON.stringify(call.input)}`);
  assert.ok(CITIES.includes(call.input.city), `${what}: city ${JSON.stringify(call.input.city)}`);
  assert.equal(message.stop_reason, 'tool_use', `${what}: stop_reason ${message.stop_reason}`);
  return call;
}

await check('-', 'a wrong x-api-key is a 401 authentication_error', async () => {
  const stranger = new Anthropic({ baseURL, apiKey: 'not-the-key', maxRetries: 0 });
  try {
    await stranger.messages.create({ model: MODELS[0], max_tokens: 4, messages: [{ role: 'user', content: 'hi' }] });
  } catch (e) {
    assert.ok(e instanceof AuthenticationError, `not an AuthenticationError: ${e}`);
    assert.equal(e.type, 'authentication_error');
    return;
  }
  assert.fail('the request was accepted without the key');
});

await check('-', 'an unknown model is a 404 not_found_error', async () => {
  try {
    await client.messages.create({ model: 'no-such-model', max_tokens: 4, messages: [{ role: 'user', content: 'hi' }] });
  } catch (e) {
    assert.ok(e instanceof NotFoundError, `not a NotFoundError: ${e}`);
    assert.equal(e.type, 'not_found_error');
    return;
  }
  assert.fail('the request was accepted');
});

for (const model of MODELS) {
  await check(model, 'messages.create plain', async () => {
    const m = await client.messages.create({
      model,
      max_tokens: 16,
      temperature: 0,
      system: 'You are terse.',
      messages: [{ role: 'user', content: 'Say hello.' }],
    });
    assert.match(m.id, /^msg_/);
    assert.equal(m.type, 'message');
    assert.equal(m.role, 'assistant');
    assert.equal(m.model, model);
    assert.ok(m.content.length >= 1 && m.content[0].type === 'text', `content ${JSON.stringify(m.content)}`);
    assert.ok(['end_turn', 'max_tokens'].includes(m.stop_reason), `stop_reason ${m.stop_reason}`);
    assert.ok(m.usage.input_tokens > 0 && m.usage.output_tokens > 0, `usage ${JSON.stringify(m.usage)}`);
    assert.ok(m.usage.output_tokens <= 16);
  });

  await check(model, 'stop_sequences end the answer with stop_reason stop_sequence', async () => {
    // Greedy decoding repeats itself: a piece of the free answer, given as a stop sequence, ends it there.
    const body = { model, max_tokens: 24, temperature: 0, messages: [{ role: 'user', content: 'Say hello.' }] };
    const free = textOf(await client.messages.create(body));
    const chars = Array.from(free);
    assert.ok(chars.length >= 8, `the free answer is too short to cut: ${JSON.stringify(free)}`);
    const seq = chars.slice(4, 8).join('');
    const m = await client.messages.create({ ...body, stop_sequences: [seq] });
    assert.equal(m.stop_reason, 'stop_sequence', `stop_reason ${m.stop_reason} (free answer ${JSON.stringify(free)}, stop ${JSON.stringify(seq)})`);
    assert.equal(m.stop_sequence, seq);
    const cut = textOf(m);
    assert.ok(free.startsWith(cut.trimEnd()) && free.indexOf(seq) >= cut.trimEnd().length,
      `the answer ${JSON.stringify(cut)} is not the free answer ${JSON.stringify(free)} cut before ${JSON.stringify(seq)}`);
  });

  await check(model, 'messages.stream text deltas make the final message', async () => {
    const stream = client.messages.stream({
      model,
      max_tokens: 24,
      temperature: 0,
      messages: [{ role: 'user', content: 'Tell me a story.' }],
    });
    let text = '';
    const events = [];
    stream.on('text', (delta) => {
      text += delta;
    });
    stream.on('streamEvent', (event) => events.push(event.type));
    const final = await stream.finalMessage();
    assert.equal(events[0], 'message_start');
    assert.equal(events.at(-1), 'message_stop');
    assert.ok(events.includes('content_block_start') && events.includes('message_delta'), `events ${events}`);
    assert.ok(text.length > 0, 'no text delta');
    assert.equal(text, textOf(final), 'the text deltas do not concatenate to the final text');
    assert.equal(final.stop_reason, final.usage.output_tokens >= 24 ? 'max_tokens' : 'end_turn');
    assert.ok(final.usage.input_tokens > 0 && final.usage.output_tokens > 0, `usage ${JSON.stringify(final.usage)}`);
  });

  await check(model, 'tool_use with tool_choice any', async () => {
    const m = await client.messages.create({
      model,
      max_tokens: MAX_TOKENS,
      temperature: 0,
      tools,
      tool_choice: { type: 'any', disable_parallel_tool_use: true },
      messages: [{ role: 'user', content: prompt }],
    });
    const call = checkToolUse(m, m.content.find((b) => b.type === 'tool_use')?.name, 'any');
    assert.ok(['get_weather', 'get_time'].includes(call.name));
  });

  await check(model, 'tool_use with a named tool, streamed', async () => {
    const stream = client.messages.stream({
      model,
      max_tokens: MAX_TOKENS,
      temperature: 0,
      tools,
      tool_choice: { type: 'tool', name: 'get_time', disable_parallel_tool_use: true },
      messages: [{ role: 'user', content: prompt }],
    });
    let fragments = 0;
    stream.on('inputJson', () => fragments++);
    const final = await stream.finalMessage();
    checkToolUse(final, 'get_time', 'named tool');
    assert.ok(fragments >= 1, 'the input did not stream (no input_json_delta)');
  });

  await check(model, 'multi-turn with a tool_result', async () => {
    const turns = (result) => [
      { role: 'user', content: prompt },
      {
        role: 'assistant',
        content: [
          { type: 'text', text: 'Let me check.' },
          { type: 'tool_use', id: 'toolu_01abc', name: 'get_weather', input: { city: 'Paris' } },
        ],
      },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_01abc', content: [{ type: 'text', text: result }] }] },
    ];
    const m = await client.messages.create({
      model,
      max_tokens: 16,
      temperature: 0,
      tools,
      tool_choice: { type: 'none' },
      messages: turns('21 C, clear'),
    });
    assert.equal(m.content.filter((b) => b.type === 'tool_use').length, 0, 'tool_choice none answered with a call');
    assert.ok(['end_turn', 'max_tokens'].includes(m.stop_reason), `stop_reason ${m.stop_reason}`);
    // The tool_result reaches the prompt: a longer result costs more input tokens.
    const short = await client.messages.countTokens({ model, tools, tool_choice: { type: 'none' }, messages: turns('21 C, clear') });
    const long = await client.messages.countTokens({
      model,
      tools,
      tool_choice: { type: 'none' },
      messages: turns('21 C, clear, light wind from the west, humidity 40 percent, no rain expected today'),
    });
    // input_tokens counts what was evaluated; cache_read_input_tokens what the prompt cache held.
    assert.equal(m.usage.input_tokens + m.usage.cache_read_input_tokens, short.input_tokens,
      'count_tokens differs from the generation\'s input + cache read tokens');
    assert.ok(long.input_tokens > short.input_tokens, `the tool_result is not in the prompt (${long.input_tokens} <= ${short.input_tokens})`);
  });

  await check(model, 'count_tokens', async () => {
    const messages = [{ role: 'user', content: 'Count me.' }];
    const counted = await client.messages.countTokens({ model, system: 'Be brief.', messages });
    assert.ok(Number.isInteger(counted.input_tokens) && counted.input_tokens > 0, JSON.stringify(counted));
    const m = await client.messages.create({ model, max_tokens: 1, system: 'Be brief.', messages });
    assert.equal(m.usage.input_tokens + m.usage.cache_read_input_tokens, counted.input_tokens);
  });

  await check(model, 'malformed requests are 400s naming the field', async () => {
    const messages = [{ role: 'user', content: prompt }];
    await expect400('a tool without input_schema', 'tools[0].input_schema', {
      model,
      max_tokens: 8,
      messages,
      tools: [{ name: 'get_weather', description: 'no schema' }],
    });
    await expect400('a tool name with a space', 'tools[1].name', {
      model,
      max_tokens: 8,
      messages,
      tools: [tools[0], { name: 'get time', input_schema: { type: 'object' } }],
    });
    await expect400('a schema keyword the grammar cannot enforce', 'tools[0].input_schema', {
      model,
      max_tokens: 8,
      messages,
      tools: [{ name: 'f', input_schema: { type: 'object', properties: { s: { type: 'string', pattern: '^a+$' } } } }],
    });
    await expect400('tool_choice naming an undeclared tool', 'tool_choice', {
      model,
      max_tokens: 8,
      messages,
      tools,
      tool_choice: { type: 'tool', name: 'get_news' },
    });
    await expect400('a tool_result answering no call', 'messages[0].content[0].tool_use_id', {
      model,
      max_tokens: 8,
      messages: [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_missing', content: '21 C' }] }],
    });
    await expect400('an image block', 'messages[0].content[1].type', {
      model,
      max_tokens: 8,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'What is in this picture?' },
            { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } },
          ],
        },
      ],
    });
    await expect400('max_tokens missing', 'max_tokens', { model, messages });
  });
}

clearTimeout(watchdog);
console.log('all Anthropic client checks passed');
