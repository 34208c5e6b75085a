// Tenants with the official `openai` npm client (tests/scripts/serve_tenants.sh starts the server):
//   limited  — 1 request per minute: the second is a 429 in OpenAI's shape with Retry-After and the
//              x-ratelimit-* headers; the client's own retry succeeds once a reload (SIGHUP) raised the limit;
//   calm     — a stream in flight across the reload ends normally (no dropped connection);
//   flood    — 2 at a time: a burst of its requests leaves calm's requests answered.
// Env: BASE_URL, MODEL, KEYS_FILE (rewritten for the reload), SERVER_PID, SERVER_LOG, TEST_TIMEOUT_S.
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import OpenAI, { APIError } from 'openai';

const env = process.env;
const baseURL = env.BASE_URL.replace(/\/+$/, '') + '/v1';
const MODEL = env.MODEL;
const watchdog = setTimeout(() => {
  console.error(`FAIL timeout: the checks did not finish within ${env.TEST_TIMEOUT_S ?? 90} s`);
  process.exit(1);
}, Number(env.TEST_TIMEOUT_S ?? 90) * 1000);

const KEYS = { limited: 'limited-key-0001', calm: 'calm-key-00000001', flood: 'flood-key-0000001' };
function keysFile(limitedPerMinute) {
  return JSON.stringify({
    tenants: [
      { name: 'limited', key: KEYS.limited, requests_per_minute: limitedPerMinute },
      { name: 'calm', key: KEYS.calm, priority: 'interactive', weight: 2 },
      { name: 'flood', key: KEYS.flood, max_concurrent: 2, priority: 'batch' },
    ],
  });
}

const chat = (c, extra = {}) =>
  c.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Say hello.' }], max_tokens: 8, ...extra });

// Sends SIGHUP and waits until the server's log says the keys were reloaded (the n-th time).
let reloads = 0;
async function reload() {
  reloads += 1;
  process.kill(Number(env.SERVER_PID), 'SIGHUP');
  for (let i = 0; i < 200; i++) {
    const n = (readFileSync(env.SERVER_LOG, 'utf8').match(/API keys reloaded/g) ?? []).length;
    if (n >= reloads) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('the server never logged the reload');
}

async function check(name, fn) {
  try {
    await fn();
    console.log(`ok ${name}`);
  } catch (e) {
    console.error(`FAIL ${name}: ${e?.stack ?? e}`);
    process.exit(1);
  }
}

await check('a tenant over its requests per minute gets 429 with Retry-After and x-ratelimit headers', async () => {
  const c = new OpenAI({ baseURL, apiKey: KEYS.limited, maxRetries: 0 });
  const { response } = await chat(c).withResponse();
  assert.equal(response.headers.get('x-ratelimit-limit-requests'), '1');
  assert.equal(response.headers.get('x-ratelimit-remaining-requests'), '0');
  assert.match(response.headers.get('x-ratelimit-reset-requests') ?? '', /^(\d+m)?\d+(\.\d+)?s$/);
  try {
    await chat(c);
    assert.fail('the second request of the minute was answered');
  } catch (e) {
    assert.ok(e instanceof APIError, `not an APIError: ${e}`);
    assert.equal(e.status, 429);
    assert.equal(e.type, 'rate_limit_error', JSON.stringify(e.error));
    assert.match(e.message, /limited/, 'the message names the tenant');
    assert.ok(!e.message.includes(KEYS.limited), 'the message holds the key');
    const retry = Number(e.headers.get('retry-after'));
    assert.ok(retry >= 1 && retry <= 60, `Retry-After ${e.headers.get('retry-after')}`);
  }
});

await check('its client retries, and the retry succeeds once a reload raised the limit', async () => {
  let refusals = 0;
  const c = new OpenAI({
    baseURL,
    apiKey: KEYS.limited,
    maxRetries: 3,
    fetch: async (url, init) => {
      const r = await fetch(url, init);
      if (r.status === 429 && refusals++ === 0) {
        writeFileSync(env.KEYS_FILE, keysFile(100));
        await reload();
        // The server's Retry-After was true before the reload (up to 60 s); since the reload the limit
        // lets it in now, so the client is told 1 s rather than made to wait out the old window.
        const headers = new Headers(r.headers);
        headers.set('retry-after', '1');
        return new Response(await r.text(), { status: r.status, headers });
      }
      return r;
    },
  });
  const done = await chat(c);
  assert.equal(refusals, 1, 'one refusal, then the retry was answered');
  assert.ok(done.choices[0].message.content !== undefined);
});

await check('a stream in flight across a reload ends normally', async () => {
  const c = new OpenAI({ baseURL, apiKey: KEYS.calm, maxRetries: 0 });
  const stream = await chat(c, { stream: true, max_tokens: 24 });
  let chunks = 0;
  let finish = null;
  for await (const chunk of stream) {
    if (chunks++ === 0) await reload();
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.ok(['stop', 'length'].includes(finish), `finish_reason ${finish}`);
});

await check("a flood from one key leaves another key's requests answered", async () => {
  const flood = new OpenAI({ baseURL, apiKey: KEYS.flood, maxRetries: 0 });
  const calm = new OpenAI({ baseURL, apiKey: KEYS.calm, maxRetries: 0 });
  const burst = Array.from({ length: 16 }, () => chat(flood, { max_tokens: 32 }).then(() => 200, (e) => e.status));
  const answered = await Promise.all(Array.from({ length: 4 }, () => chat(calm).then(() => 200, (e) => e)));
  for (const a of answered) assert.equal(a, 200, `calm was refused: ${a}`);
  const codes = await Promise.all(burst);
  for (const code of codes) assert.ok(code === 200 || code === 429, `flood got ${code}`);
  console.log(`  flood: ${codes.filter((c) => c === 429).length} of ${codes.length} refused (429)`);
});

await check('per-tenant metrics name tenants, never keys; router gauges are there', async () => {
  const text = await (await fetch(env.BASE_URL + '/metrics', { headers: { authorization: `Bearer ${KEYS.calm}` } })).text();
  assert.match(text, /gantry_tenant_requests_admitted_total\{tenant="calm"\}/);
  assert.match(text, /gantry_tenant_requests_refused_total\{reason="rate",tenant="limited"\} [1-9]/);
  assert.match(text, /vllm:num_requests_waiting\{model_name="/);
  assert.match(text, /vllm:num_requests_running\{model_name="/);
  for (const k of Object.values(KEYS)) assert.ok(!text.includes(k), 'a key in /metrics');
  const log = readFileSync(env.SERVER_LOG, 'utf8');
  for (const k of Object.values(KEYS)) assert.ok(!log.includes(k), 'a key in the log');
});

clearTimeout(watchdog);
