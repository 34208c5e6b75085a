// Speculative decoding seen by a real client (the pinned `openai` npm client): the same greedy requests
// against several OpenAI-compatible servers give the same text from each (one without speculation, the
// others with a draft model or prompt lookup). The compared requests go one at a time, so each server
// decodes them in the same batches every run (which sequences share a batch changes the last bits of the
// logits, and so may tip a near-tie either way, with or without speculation); then all of them at once
// to each speculating server, which must batch them and still answer every one in full. Usage:
//   BASES=http://127.0.0.1:P1,http://127.0.0.1:P2,... MODEL=<model id> node speculative_client_test.mjs
// The first base is the reference. Prints "ok <check>"; the first failure prints "FAIL <check>: <why>" and
// exits 1. TEST_TIMEOUT_S (default 90) bounds the whole run.
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const env = process.env;
const bases = (env.BASES ?? '').split(',').filter(Boolean);
const MODEL = env.MODEL;
if (bases.length < 2 || !MODEL) {
  console.error('FAIL setup: BASES (two or more base URLs) and MODEL are required');
  process.exit(2);
}
const watchdog = setTimeout(() => {
  console.error(`FAIL timeout: not done within ${env.TEST_TIMEOUT_S ?? 90} s`);
  process.exit(1);
}, Number(env.TEST_TIMEOUT_S ?? 90) * 1000);

const PROMPTS = [
  'The quick brown fox jumps over the lazy dog. The quick brown fox',
  'Once upon a time, in a land far away, there lived a',
  'def fibonacci(n):\n    if n < 2:\n        return n\n    return',
  '1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,',
];
const MAX_TOKENS = 40;

// Every prompt as a completion and as a streamed chat turn: one after another, or all at once.
async function run(base, together) {
  const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'none', maxRetries: 0, timeout: 60_000 });
  const jobs = [];
  const completions = PROMPTS.map((prompt) => async () => {
    const r = await client.completions.create({ model: MODEL, prompt, max_tokens: MAX_TOKENS, temperature: 0 });
    return { text: r.choices[0].text, tokens: r.usage.completion_tokens, finish: r.choices[0].finish_reason };
  });
  const chats = PROMPTS.map((content) => async () => {
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content }],
      max_tokens: MAX_TOKENS,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let tokens = -1;
    for await (const chunk of stream) {
      text += chunk.choices?.[0]?.delta?.content ?? '';
      if (chunk.usage) tokens = chunk.usage.completion_tokens;
    }
    return { text, tokens };
  });
  jobs.push(...completions, ...chats);
  let out;
  if (together) {
    out = await Promise.all(jobs.map((job) => job()));
  } else {
    out = [];
    for (const job of jobs) out.push(await job());
  }
  return { completions: out.slice(0, PROMPTS.length), chats: out.slice(PROMPTS.length) };
}

async function check(name, fn) {
  try {
    await fn();
    console.log(`ok ${name}`);
  } catch (e) {
    console.error(`FAIL ${name}: ${e.message}`);
    process.exit(1);
  }
}

const results = [];
for (const base of bases) {
  await check(`requests to ${base}`, async () => results.push(await run(base, false)));
}
const [want, ...others] = results;
await check('the reference generates text', async () => {
  for (const c of [...want.completions, ...want.chats]) assert.ok(c.tokens > 0, JSON.stringify(c));
});
for (const [i, got] of others.entries()) {
  const base = bases[i + 1];
  await check(`${base} gives the reference's completions`, async () =>
    assert.deepEqual(got.completions, want.completions),
  );
  await check(`${base} gives the reference's streamed chats`, async () => assert.deepEqual(got.chats, want.chats));
}
for (const base of bases.slice(1)) {
  await check(`${base} answers all requests at once in full`, async () => {
    const r = await run(base, true);
    for (const [i, c] of [...r.completions, ...r.chats].entries()) {
      assert.ok(c.tokens > 0 && c.tokens <= MAX_TOKENS && c.text.length > 0, `request ${i}: ${JSON.stringify(c)}`);
    }
  });
}
clearTimeout(watchdog);
