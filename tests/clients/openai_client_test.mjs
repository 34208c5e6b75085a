// Drives an OpenAI-compatible server with the official `openai` npm client (pinned in package.json)
// and asserts what a real application relies on. Usage:
//   BASE_URL=http://127.0.0.1:PORT/v1 MODEL=<chat model> EMBED_MODEL=<embedding model> API_KEY=<key> \
//     node tests/clients/openai_client_test.mjs
// BASE_URL may be given with or without the trailing /v1. API_KEY defaults to "none" (the client requires one).
// Each check prints "ok <name>"; the first failure prints "FAIL <name>: <why>" and the exit code is 1.
// Switches meant only for validating this script against other servers (gantry's test sets none of them):
//   EMBED_MODEL=""    skip the embeddings checks (printed as "skip", never as "ok"),
//   ONLY=a,b          run only the named checks,
//   ANY_MODEL_OK=1    the server answers for any model name (llama-server does), so skip the unknown-model check.
// A global timeout (TEST_TIMEOUT_S, default 60) ends the run with exit code 1 so it never hangs.
import assert from 'node:assert/strict';
import OpenAI, { APIError } from 'openai';

const env = process.env;
const rawBase = env.BASE_URL ?? 'http://127.0.0.1:8080/v1';
const baseURL = rawBase.replace(/\/+$/, '').replace(/(\/v1)?$/, '/v1');
const MODEL = env.MODEL;
const EMBED_MODEL = env.EMBED_MODEL ?? MODEL;
const ONLY = env.ONLY ? new Set(env.ONLY.split(',').map((s) => s.trim())) : null;
const TIMEOUT_S = Number(env.TEST_TIMEOUT_S ?? 60);

if (!MODEL) {
  console.error('FAIL setup: MODEL is not set (the model id the server serves for chat/completions)');
  process.exit(2);
}

const watchdog = setTimeout(() => {
  console.error(`FAIL timeout: the checks did not finish within ${TIMEOUT_S} s (server at ${baseURL} hung?)`);
  process.exit(1);
}, TIMEOUT_S * 1000);

// No retries: a failing server must fail the test at once, not after backoff.
const client = new OpenAI({ baseURL, apiKey: env.API_KEY || 'none', maxRetries: 0, timeout: 30_000 });

const PROMPT = 'Say hello to the world in one short sentence.';
const MAX_TOKENS = 16;

function checkUsage(usage, maxTokens, what) {
  assert.ok(usage, `${what}: response has no usage`);
  for (const k of ['prompt_tokens', 'completion_tokens', 'total_tokens']) {
    assert.ok(Number.isInteger(usage[k]), `${what}: usage.${k} is not an integer (${JSON.stringify(usage)})`);
  }
  assert.ok(usage.prompt_tokens > 0, `${what}: usage.prompt_tokens must be > 0 (${JSON.stringify(usage)})`);
  assert.ok(
    usage.completion_tokens > 0 && usage.completion_tokens <= maxTokens,
    `${what}: usage.completion_tokens must be in 1..${maxTokens} (${JSON.stringify(usage)})`,
  );
  assert.equal(
    usage.total_tokens,
    usage.prompt_tokens + usage.completion_tokens,
    `${what}: usage.total_tokens != prompt_tokens + completion_tokens (${JSON.stringify(usage)})`,
  );
}

function checkFinish(finish, usage, maxTokens, what) {
  assert.ok(['stop', 'length'].includes(finish), `${what}: finish_reason is ${JSON.stringify(finish)}, want stop|length`);
  if (finish === 'length') {
    assert.equal(usage.completion_tokens, maxTokens, `${what}: finish_reason=length but completion_tokens != max_tokens`);
  }
}

// Decodes an OpenAI base64 embedding (little-endian float32 bytes) into numbers.
function decodeBase64Floats(b64, what) {
  assert.equal(typeof b64, 'string', `${what}: base64 embedding is not a string (${typeof b64})`);
  const buf = Buffer.from(b64, 'base64');
  assert.ok(buf.length > 0 && buf.length % 4 === 0, `${what}: base64 payload of ${buf.length} bytes is not float32s`);
  const out = [];
  for (let i = 0; i < buf.length; i += 4) out.push(buf.readFloatLE(i));
  return out;
}

function assertVectorsClose(a, b, what) {
  assert.equal(a.length, b.length, `${what}: lengths differ (${a.length} vs ${b.length})`);
  for (let i = 0; i < a.length; i++) {
    // float JSON numbers may be printed with fewer digits than float32 holds.
    const tol = 1e-4 * Math.max(1, Math.abs(a[i]));
    assert.ok(Math.abs(a[i] - b[i]) <= tol, `${what}: element ${i} differs (${a[i]} vs ${b[i]})`);
  }
}

const checks = [];
const check = (name, fn) => checks.push({ name, fn });
let plainChatText = null;

check('models.list', async () => {
  const ids = [];
  for await (const m of client.models.list()) {
    assert.equal(typeof m.id, 'string', `model entry without a string id: ${JSON.stringify(m)}`);
    ids.push(m.id);
  }
  assert.ok(ids.includes(MODEL), `models.list does not contain ${MODEL}: ${JSON.stringify(ids)}`);
  if (EMBED_MODEL) assert.ok(ids.includes(EMBED_MODEL), `models.list does not contain ${EMBED_MODEL}: ${JSON.stringify(ids)}`);
});

check('chat.completions', async () => {
  const r = await client.chat.completions.create({
    model: MODEL,
    messages: [{ role: 'user', content: PROMPT }],
    max_tokens: MAX_TOKENS,
    temperature: 0,
    seed: 42,
  });
  assert.equal(r.object, 'chat.completion', `object is ${JSON.stringify(r.object)}`);
  assert.equal(typeof r.id, 'string');
  assert.equal(r.choices.length, 1, `want 1 choice, got ${r.choices.length}`);
  const c = r.choices[0];
  assert.equal(c.message.role, 'assistant', `message.role is ${JSON.stringify(c.message.role)}`);
  assert.equal(typeof c.message.content, 'string', `message.content is ${typeof c.message.content}`);
  assert.ok(c.message.content.length > 0, 'message.content is empty');
  checkUsage(r.usage, MAX_TOKENS, 'chat');
  checkFinish(c.finish_reason, r.usage, MAX_TOKENS, 'chat');
  plainChatText = c.message.content;
});

check('chat.completions stream', async () => {
  const stream = await client.chat.completions.create({
    model: MODEL,
    messages: [{ role: 'user', content: PROMPT }],
    max_tokens: MAX_TOKENS,
    temperature: 0,
    seed: 42,
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let deltas = 0;
  let finish = null;
  let usage = null;
  let chunks = 0;
  let afterUsage = 0;
  for await (const chunk of stream) {
    chunks++;
    assert.equal(chunk.object, 'chat.completion.chunk', `chunk.object is ${JSON.stringify(chunk.object)}`);
    if (usage) afterUsage++;
    if (chunk.usage) {
      // include_usage: the usage chunk is the last one and carries no choices.
      assert.equal(chunk.choices.length, 0, `usage chunk has ${chunk.choices.length} choices, want 0`);
      usage = chunk.usage;
      continue;
    }
    for (const c of chunk.choices) {
      if (c.delta?.content) {
        text += c.delta.content;
        deltas++;
      }
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.ok(chunks > 0, 'stream produced no chunks');
  assert.ok(deltas > 0 && text.length > 0, 'stream produced no content deltas');
  assert.ok(usage, 'stream_options.include_usage set but no usage chunk arrived');
  assert.equal(afterUsage, 0, 'chunks arrived after the usage chunk');
  checkUsage(usage, MAX_TOKENS, 'stream');
  checkFinish(finish, usage, MAX_TOKENS, 'stream');
  assert.ok(deltas <= usage.completion_tokens, `${deltas} content deltas but usage.completion_tokens=${usage.completion_tokens}`);
  // Greedy decoding (temperature 0) of the same prompt: the streamed text is the plain answer, split in deltas.
  if (plainChatText !== null) {
    assert.equal(text, plainChatText, 'concatenated stream deltas differ from the non-streamed answer to the same request');
  }
});

check('completions', async () => {
  const r = await client.completions.create({
    model: MODEL,
    prompt: 'Once upon a time',
    max_tokens: MAX_TOKENS,
    temperature: 0,
    seed: 42,
  });
  assert.equal(r.object, 'text_completion', `object is ${JSON.stringify(r.object)}`);
  assert.equal(r.choices.length, 1, `want 1 choice, got ${r.choices.length}`);
  const c = r.choices[0];
  assert.equal(typeof c.text, 'string', `choices[0].text is ${typeof c.text}`);
  assert.ok(c.text.length > 0, 'choices[0].text is empty');
  checkUsage(r.usage, MAX_TOKENS, 'completions');
  checkFinish(c.finish_reason, r.usage, MAX_TOKENS, 'completions');
});

// n: 2 — two choices of one prompt, with indices 0 and 1; greedy, so both are the same text. Usage counts the
// prompt once and both choices' tokens.
check('chat.completions n=2', async () => {
  const r = await client.chat.completions.create({
    model: MODEL,
    messages: [{ role: 'user', content: PROMPT }],
    max_tokens: MAX_TOKENS,
    temperature: 0,
    n: 2,
  });
  assert.equal(r.choices.length, 2, `want 2 choices, got ${r.choices.length}`);
  assert.deepEqual(r.choices.map((c) => c.index).sort(), [0, 1], 'choice indices are not 0 and 1');
  for (const c of r.choices) {
    assert.equal(typeof c.message.content, 'string', `choice ${c.index}: content is ${typeof c.message.content}`);
    assert.ok(c.message.content.length > 0, `choice ${c.index}: content is empty`);
    assert.ok(['stop', 'length'].includes(c.finish_reason), `choice ${c.index}: finish_reason ${c.finish_reason}`);
  }
  assert.equal(r.choices[0].message.content, r.choices[1].message.content, 'greedy choices differ');
  checkUsage(r.usage, 2 * MAX_TOKENS, 'chat n=2');
  if (plainChatText !== null) {
    assert.equal(r.choices[0].message.content, plainChatText, 'a greedy choice differs from the one-choice answer');
    assert.ok(r.usage.completion_tokens >= 2, 'usage counts both choices');
  }
});

check('chat.completions n=2 stream', async () => {
  const stream = await client.chat.completions.create({
    model: MODEL,
    messages: [{ role: 'user', content: PROMPT }],
    max_tokens: MAX_TOKENS,
    temperature: 0,
    n: 2,
    stream: true,
    stream_options: { include_usage: true },
  });
  const text = ['', ''];
  const finish = [null, null];
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) {
      usage = chunk.usage;
      continue;
    }
    for (const c of chunk.choices) {
      assert.ok(c.index === 0 || c.index === 1, `chunk for choice index ${c.index}`);
      if (c.delta?.content) text[c.index] += c.delta.content;
      if (c.finish_reason) {
        assert.equal(finish[c.index], null, `choice ${c.index} finished twice`);
        finish[c.index] = c.finish_reason;
      }
    }
  }
  for (const i of [0, 1]) {
    assert.ok(text[i].length > 0, `choice ${i} streamed no content`);
    assert.ok(['stop', 'length'].includes(finish[i]), `choice ${i}: finish_reason ${finish[i]}`);
  }
  assert.equal(text[0], text[1], 'greedy streamed choices differ');
  assert.ok(usage, 'no usage chunk');
  checkUsage(usage, 2 * MAX_TOKENS, 'stream n=2');
  if (plainChatText !== null) assert.equal(text[0], plainChatText, 'streamed choice differs from the plain answer');
});

check('completions n=2', async () => {
  const r = await client.completions.create({ model: MODEL, prompt: 'Once upon a time', max_tokens: MAX_TOKENS, n: 2, seed: 3 });
  assert.equal(r.choices.length, 2, `want 2 choices, got ${r.choices.length}`);
  assert.deepEqual(r.choices.map((c) => c.index).sort(), [0, 1], 'choice indices are not 0 and 1');
  checkUsage(r.usage, 2 * MAX_TOKENS, 'completions n=2');
});

// The same seed and request give the same text, also when sampling (temperature 1).
check('seed reproducible', async () => {
  const ask = () =>
    client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: PROMPT }],
      max_tokens: MAX_TOKENS,
      temperature: 1,
      seed: 1234,
      presence_penalty: 0.5,
      frequency_penalty: 0.5,
    });
  const a = await ask();
  const b = await ask();
  assert.equal(a.choices[0].message.content, b.choices[0].message.content, 'same seed, different text');
});

// Streamed logprobs: the chunks that bring content carry their tokens' logprobs; together they are one entry per
// generated token.
check('chat.completions logprobs stream', async () => {
  const stream = await client.chat.completions.create({
    model: MODEL,
    messages: [{ role: 'user', content: PROMPT }],
    max_tokens: MAX_TOKENS,
    temperature: 0,
    logprobs: true,
    top_logprobs: 2,
    stream: true,
    stream_options: { include_usage: true },
  });
  let entries = 0;
  let contentChunks = 0;
  let withLogprobs = 0;
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      if (c.delta?.content) contentChunks++;
      const content = c.logprobs?.content;
      if (!content) continue;
      withLogprobs++;
      for (const t of content) {
        assert.equal(typeof t.token, 'string', 'logprob entry without a token');
        assert.ok(Number.isFinite(t.logprob) && t.logprob <= 0, `bad logprob ${t.logprob}`);
        assert.equal(t.top_logprobs.length, 2, `want 2 top_logprobs, got ${t.top_logprobs.length}`);
        entries++;
      }
    }
  }
  assert.ok(usage, 'no usage chunk');
  assert.ok(contentChunks > 0 && withLogprobs > 0, 'no streamed chunk carried logprobs');
  assert.equal(entries, usage.completion_tokens, 'streamed logprobs are not one per generated token');
});

check('completions logprobs stream', async () => {
  const stream = await client.completions.create({
    model: MODEL,
    prompt: 'Once upon a time',
    max_tokens: MAX_TOKENS,
    temperature: 0,
    logprobs: 1,
    stream: true,
    stream_options: { include_usage: true },
  });
  let tokens = 0;
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices ?? []) {
      if (!c.logprobs) continue;
      assert.equal(c.logprobs.tokens.length, c.logprobs.token_logprobs.length, 'tokens and token_logprobs differ in length');
      tokens += c.logprobs.tokens.length;
    }
  }
  assert.ok(usage, 'no usage chunk');
  assert.equal(tokens, usage.completion_tokens, 'streamed logprobs are not one per generated token');
});

check('error n and logit_bias', async () => {
  for (const [param, extra] of [
    ['n', { n: 100 }],
    ['logit_bias', { logit_bias: { 999999999: -100 } }],
    ['presence_penalty', { presence_penalty: 3 }],
  ]) {
    let err = null;
    try {
      await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: PROMPT }], max_tokens: 4, ...extra });
    } catch (e) {
      err = e;
    }
    assert.ok(err instanceof APIError, `${param}: want an APIError, got ${err?.constructor?.name}: ${err?.message}`);
    assert.equal(err.status, 400, `${param}: HTTP ${err.status}`);
    assert.equal(err.param, param, `${param}: the error names ${JSON.stringify(err.param)}`);
  }
});

let floatVector = null;
check('embeddings float', async () => {
  const r = await client.embeddings.create({ model: EMBED_MODEL, input: 'The quick brown fox.', encoding_format: 'float' });
  assert.equal(r.object, 'list', `object is ${JSON.stringify(r.object)}`);
  assert.equal(r.data.length, 1, `want 1 embedding, got ${r.data.length}`);
  const e = r.data[0];
  assert.equal(e.index, 0);
  assert.ok(Array.isArray(e.embedding), `embedding is not an array (${typeof e.embedding})`);
  assert.ok(e.embedding.length > 0, 'embedding is empty');
  assert.ok(e.embedding.every((x) => typeof x === 'number' && Number.isFinite(x)), 'embedding has non-finite or non-number entries');
  assert.ok(e.embedding.some((x) => x !== 0), 'embedding is all zeros');
  assert.ok(r.usage && Number.isInteger(r.usage.prompt_tokens) && r.usage.prompt_tokens > 0, `bad usage ${JSON.stringify(r.usage)}`);
  floatVector = e.embedding;
});

check('embeddings base64', async () => {
  const inputs = ['The quick brown fox.', 'A second, different input.'];
  const r = await client.embeddings.create({ model: EMBED_MODEL, input: inputs, encoding_format: 'base64' });
  assert.equal(r.data.length, 2, `want 2 embeddings, got ${r.data.length}`);
  assert.deepEqual(r.data.map((d) => d.index).sort(), [0, 1], 'embedding indices are not 0 and 1');
  const byIndex = [...r.data].sort((a, b) => a.index - b.index);
  const v0 = decodeBase64Floats(byIndex[0].embedding, 'base64[0]');
  const v1 = decodeBase64Floats(byIndex[1].embedding, 'base64[1]');
  assert.equal(v1.length, v0.length, 'the two base64 embeddings differ in length');
  if (floatVector) assertVectorsClose(v0, floatVector, 'base64 vs float embedding of the same input');
  // The client's default (no encoding_format) asks for base64 and decodes it into a Float32Array.
  const d = await client.embeddings.create({ model: EMBED_MODEL, input: inputs[0] });
  const dv = Array.from(d.data[0].embedding);
  assert.equal(dv.length, v0.length, 'default-format embedding length differs from the base64 one');
  assertVectorsClose(dv, v0, 'client-decoded vs base64 embedding');
});

check('error unknown model', async () => {
  let err = null;
  try {
    await client.chat.completions.create({
      model: 'no-such-model-gantry-test',
      messages: [{ role: 'user', content: PROMPT }],
      max_tokens: 4,
    });
  } catch (e) {
    err = e;
  }
  assert.ok(err, 'a request for an unknown model succeeded');
  assert.ok(err instanceof APIError, `want an APIError, got ${err?.constructor?.name}: ${err?.message}`);
  assert.ok(err.status >= 400 && err.status < 500, `unknown model gave HTTP ${err.status}, want 4xx`);
  assert.ok(typeof err.message === 'string' && err.message.length > 0, 'error has no message');
  console.log(`   (status ${err.status}: ${err.message.slice(0, 120)})`);
});

check('error bad request', async () => {
  // A chat request without messages, and one whose messages is not an array: a server must answer 4xx
  // (not succeed, crash or 5xx). (llama-server accepts messages: [], so that case is not asserted.)
  for (const [what, body] of [
    ['no messages', { model: MODEL, max_tokens: 4 }],
    ['messages not an array', { model: MODEL, messages: 'hello', max_tokens: 4 }],
  ]) {
    let err = null;
    try {
      await client.chat.completions.create(body);
    } catch (e) {
      err = e;
    }
    assert.ok(err, `a chat request with ${what} succeeded`);
    assert.ok(err instanceof APIError, `${what}: want an APIError, got ${err?.constructor?.name}: ${err?.message}`);
    assert.ok(err.status >= 400 && err.status < 500, `${what} gave HTTP ${err.status}, want 4xx`);
    assert.ok(typeof err.message === 'string' && err.message.length > 0, `${what}: error has no message`);
    console.log(`   (${what}: status ${err.status}: ${err.message.slice(0, 100)})`);
  }
});

function skipReason(name) {
  if (ONLY && !ONLY.has(name)) return 'not in ONLY';
  if (name.startsWith('embeddings') && !EMBED_MODEL) return 'EMBED_MODEL is empty';
  if (name === 'error unknown model' && env.ANY_MODEL_OK === '1') return 'ANY_MODEL_OK=1';
  return null;
}

let failed = 0;
for (const { name, fn } of checks) {
  const why = skipReason(name);
  if (why) {
    console.log(`skip ${name} (${why})`);
    continue;
  }
  try {
    await fn();
    console.log(`ok ${name}`);
  } catch (e) {
    failed++;
    const msg = e instanceof APIError ? `HTTP ${e.status}: ${e.message}` : e?.message ?? String(e);
    console.log(`FAIL ${name}: ${msg}`);
  }
}
clearTimeout(watchdog);
console.log(failed ? `${failed} check(s) failed against ${baseURL}` : `all checks passed against ${baseURL}`);
process.exit(failed ? 1 : 0);
