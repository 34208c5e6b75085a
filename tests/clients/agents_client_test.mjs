// Drives gantry serve's OpenAI-compatible tool calling with the clients agents are built on, pinned in
// package.json: the Vercel AI SDK (`ai` + `@ai-sdk/openai-compatible`), LangChain.js (`@langchain/openai`) and
// the official `openai` client. Usage:
//   BASE_URL=http://127.0.0.1:PORT/v1 MODELS=a,b API_KEY=k node tests/clients/agents_client_test.mjs
// Each model is checked in turn (one whose template has no tool format uses Gantry's generic JSON format;
// the others their family's native one). Each check prints "ok <model> <name>"; the first failure prints
// "FAIL ..." and the exit code is 1. The models have random weights, so the tool's only parameter is an enum:
// the grammar then bounds every call and a forced call always completes.
import assert from 'node:assert/strict';
import { generateText, streamText, tool } from 'ai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { ChatOpenAI } from '@langchain/openai';
import OpenAI, { APIError } from 'openai';
import { z } from 'zod';

const env = process.env;
const baseURL = (env.BASE_URL ?? 'http://127.0.0.1:8080/v1').replace(/\/+$/, '');
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

const provider = createOpenAICompatible({ name: 'gantry', baseURL, apiKey });
const openai = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60_000 });

const weatherSchema = z.object({ city: z.enum(CITIES) });
const aiTools = {
  get_weather: tool({ description: 'The current weather of a city', inputSchema: weatherSchema }),
};
const oaiTools = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'The current weather of a city',
      parameters: { type: 'object', properties: { city: { type: 'string', enum: CITIES } }, required: ['city'] },
    },
  },
];

function checkCity(input, what) {
  assert.ok(input && typeof input === 'object', `${what}: the call's input is not an object: ${JSON.stringify(input)}`);
  assert.ok(CITIES.includes(input.city), `${what}: the call's city is ${JSON.stringify(input.city)}, not one of the enum`);
}

async function check(model, name, fn) {
  try {
    await fn();
    console.log(`ok ${model} ${name}`);
  } catch (e) {
    console.error(`FAIL ${model} ${name}: ${e?.stack ?? e}`);
    process.exit(1);
  }
}

async function expect400(what, param, body) {
  try {
    await openai.chat.completions.create(body);
  } catch (e) {
    assert.ok(e instanceof APIError, `${what}: not an APIError: ${e}`);
    assert.equal(e.status, 400, `${what}: status ${e.status}, want 400 (${e.message})`);
    assert.equal(e.param, param, `${what}: param ${JSON.stringify(e.param)}, want ${param} (${e.message})`);
    return;
  }
  assert.fail(`${what}: the request was accepted`);
}

for (const model of MODELS) {
  const prompt = 'What is the weather in Paris?';

  await check(model, 'ai-sdk generateText toolChoice required', async () => {
    const r = await generateText({
      model: provider(model),
      tools: aiTools,
      toolChoice: 'required',
      prompt,
      maxOutputTokens: MAX_TOKENS,
      temperature: 0,
      maxRetries: 0,
    });
    assert.ok(r.toolCalls.length >= 1, `no tool call (finishReason ${r.finishReason}, text ${JSON.stringify(r.text)})`);
    assert.equal(r.toolCalls[0].toolName, 'get_weather');
    checkCity(r.toolCalls[0].input, 'generateText');
  });

  await check(model, 'ai-sdk generateText a named tool', async () => {
    const r = await generateText({
      model: provider(model),
      tools: aiTools,
      toolChoice: { type: 'tool', toolName: 'get_weather' },
      prompt,
      maxOutputTokens: MAX_TOKENS,
      temperature: 0,
      maxRetries: 0,
    });
    assert.ok(r.toolCalls.length >= 1, `no tool call (finishReason ${r.finishReason})`);
    assert.equal(r.toolCalls[0].toolName, 'get_weather');
    checkCity(r.toolCalls[0].input, 'named tool');
  });

  await check(model, 'ai-sdk streamText tool call', async () => {
    const r = streamText({
      model: provider(model),
      tools: aiTools,
      toolChoice: 'required',
      prompt,
      maxOutputTokens: MAX_TOKENS,
      temperature: 0,
      maxRetries: 0,
      onError: ({ error }) => {
        throw error;
      },
    });
    const calls = [];
    let deltas = 0;
    for await (const part of r.fullStream) {
      if (part.type === 'tool-call') calls.push(part);
      if (part.type === 'tool-input-delta') deltas++;
      if (part.type === 'error') throw part.error;
    }
    assert.ok(calls.length >= 1, 'the stream carried no tool-call part');
    assert.equal(calls[0].toolName, 'get_weather');
    checkCity(calls[0].input, 'streamText');
    assert.ok(deltas >= 1, 'the arguments did not stream (no tool-input-delta part)');
  });

  await check(model, 'ai-sdk multi-turn with a tool result', async () => {
    const r = await generateText({
      model: provider(model),
      tools: aiTools,
      messages: [
        { role: 'user', content: prompt },
        {
          role: 'assistant',
          content: [{ type: 'tool-call', toolCallId: 'call_1', toolName: 'get_weather', input: { city: 'Paris' } }],
        },
        {
          role: 'tool',
          content: [
            {
              type: 'tool-result',
              toolCallId: 'call_1',
              toolName: 'get_weather',
              output: { type: 'json', value: { temperature_c: 21, sky: 'clear' } },
            },
          ],
        },
      ],
      toolChoice: 'none',
      maxOutputTokens: 16,
      temperature: 0,
      maxRetries: 0,
    });
    assert.equal(r.toolCalls.length, 0, 'tool_choice none answered with a call');
    assert.ok(['stop', 'length'].includes(r.finishReason), `finishReason ${r.finishReason}`);
    assert.ok(r.usage.outputTokens > 0, 'no output tokens counted');
  });

  await check(model, 'langchain bindTools invoke', async () => {
    const llm = new ChatOpenAI({ model, apiKey, configuration: { baseURL }, maxRetries: 0, temperature: 0, maxTokens: MAX_TOKENS });
    const bound = llm.bindTools(oaiTools, { tool_choice: 'required' });
    const msg = await bound.invoke(prompt);
    assert.ok(msg.tool_calls?.length >= 1, `no tool_calls on the AIMessage: ${JSON.stringify(msg)}`);
    assert.equal(msg.tool_calls[0].name, 'get_weather');
    checkCity(msg.tool_calls[0].args, 'langchain invoke');
    assert.ok(msg.tool_calls[0].id, 'the call has no id');
  });

  await check(model, 'langchain bindTools stream', async () => {
    const llm = new ChatOpenAI({ model, apiKey, configuration: { baseURL }, maxRetries: 0, temperature: 0, maxTokens: MAX_TOKENS });
    const bound = llm.bindTools(oaiTools, { tool_choice: 'required' });
    let full;
    let chunks = 0;
    for await (const chunk of await bound.stream(prompt)) {
      full = full === undefined ? chunk : full.concat(chunk);
      chunks++;
    }
    assert.ok(chunks > 1, 'one chunk only: nothing streamed');
    assert.ok(full.tool_calls?.length >= 1, `the concatenated chunks carry no tool_calls: ${JSON.stringify(full)}`);
    assert.equal(full.tool_calls[0].name, 'get_weather');
    checkCity(full.tool_calls[0].args, 'langchain stream');
  });

  await check(model, 'openai chat tools streamed', async () => {
    const stream = await openai.chat.completions.create({
      model,
      messages: [{ role: 'user', content: prompt }],
      tools: oaiTools,
      tool_choice: 'required',
      parallel_tool_calls: false,
      max_tokens: MAX_TOKENS,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    });
    const calls = [];
    let finish = null;
    let usage = null;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      for (const choice of chunk.choices) {
        if (choice.finish_reason) finish = choice.finish_reason;
        for (const d of choice.delta?.tool_calls ?? []) {
          if (!calls[d.index]) {
            assert.ok(d.id && d.type === 'function' && d.function?.name, `a call's first delta lacks id/type/name: ${JSON.stringify(d)}`);
            calls[d.index] = { id: d.id, name: d.function.name, arguments: '' };
          }
          calls[d.index].arguments += d.function?.arguments ?? '';
        }
      }
    }
    assert.equal(calls.length, 1, `parallel_tool_calls false gave ${calls.length} calls`);
    assert.equal(calls[0].name, 'get_weather');
    checkCity(JSON.parse(calls[0].arguments), 'openai stream');
    assert.equal(finish, 'tool_calls');
    assert.ok(usage && usage.completion_tokens > 0, `no usage in the last chunk: ${JSON.stringify(usage)}`);
  });

  await check(model, 'openai malformed tool requests are 400s naming the field', async () => {
    const messages = [{ role: 'user', content: prompt }];
    await expect400('undeclared function', 'tool_choice', {
      model,
      messages,
      tools: oaiTools,
      tool_choice: { type: 'function', function: { name: 'get_time' } },
    });
    await expect400('tool message without its call', 'messages[1].tool_call_id', {
      model,
      messages: [...messages, { role: 'tool', tool_call_id: 'call_missing', content: '21 C' }],
      tools: oaiTools,
    });
    await expect400('a tool without a name', 'tools[0].function.name', {
      model,
      messages,
      tools: [{ type: 'function', function: { description: 'nameless' } }],
    });
    await expect400('a schema keyword the grammar cannot enforce', 'tools[0].function.parameters', {
      model,
      messages,
      tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { s: { type: 'string', pattern: '^a+$' } } } } }],
    });
    await expect400('an image part', 'messages[0].content[0].type', {
      model,
      messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'http://127.0.0.1/x.png' } }] }],
    });
  });
}

clearTimeout(watchdog);
console.log('all agent client checks passed');
