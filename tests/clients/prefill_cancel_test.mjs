// A request cancelled, or whose client disconnects, in the middle of its prompt's chunked prefill:
// the server stops evaluating it at once, frees it, and keeps what it evaluated as a prompt cache; then
// a prompt parked in the host-memory prompt cache comes back with only its last token evaluated.
// Run by tests/scripts/serve_prefill_cancel.sh against `gantry serve` started with a small
// --prefill-chunk, so a long prompt takes many decode steps. Synchronises on the server's own gauge
// gantry_prompt_tokens_pending (the prefill backlog), never on sleeps. Usage:
//   BASE_URL=http://127.0.0.1:PORT MODEL=<name> node tests/clients/prefill_cancel_test.mjs
// Each case prints "ok <name>"; a failure prints "FAIL <name>: <why>" and exits 1.
import assert from 'node:assert/strict';
import net from 'node:net';
import OpenAI from 'openai';

const BASE = (process.env.BASE_URL ?? '').replace(/\/+$/, '');
const MODEL = process.env.MODEL;
const TIMEOUT_S = Number(process.env.TEST_TIMEOUT_S ?? 240);
if (!BASE || !MODEL) {
  console.error('FAIL setup: BASE_URL and MODEL must be set');
  process.exit(2);
}
const watchdog = setTimeout(() => {
  console.error(`FAIL timeout: not done within ${TIMEOUT_S} s`);
  process.exit(1);
}, TIMEOUT_S * 1000);

const client = new OpenAI({ baseURL: `${BASE}/v1`, apiKey: 'none', maxRetries: 0, timeout: 120_000 });

// A long prompt whose first words differ per case, so no case reuses another's cache.
function longPrompt(topic) {
  let s = `${topic}. `;
  for (let i = 0; i < 80; i++) s += `Item ${i} of the ${topic} list is checked twice before noon. `;
  return s;
}

async function gauge(name) {
  const text = await (await fetch(`${BASE}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`) && l.includes(`model="${MODEL}"`));
  return line === undefined ? null : Number(line.trim().split(/\s+/).pop());
}

async function metric(name) {
  const text = await (await fetch(`${BASE}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(name));
  return line === undefined ? null : Number(line.trim().split(/\s+/).pop());
}

// Polls `fn` until it returns a value `ok` accepts (the server's state, not a timer, decides).
async function until(what, fn, ok) {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const v = await fn();
    if (ok(v)) return v;
    if (Date.now() > deadline) throw new Error(`${what}: still ${JSON.stringify(v)} after 120 s`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

// Waits until the prefill is under way and a fifth of it is evaluated; returns the backlog then.
async function prefillInProgress() {
  const first = await until('prefill started', () => gauge('gantry_prompt_tokens_pending'), (v) => v !== null && v > 0);
  return until('prefill in progress', () => gauge('gantry_prompt_tokens_pending'), (v) => v > 0 && v <= first * 0.8);
}

// After the request ended: nothing left to evaluate, nothing in flight (but the /metrics request).
async function freed() {
  await until('prefill backlog back to 0', () => gauge('gantry_prompt_tokens_pending'), (v) => v === 0);
  await until('no request in flight', () => metric('gantry_inflight_requests'), (v) => v !== null && v <= 1);
}

// The same prompt again: its cached tokens show where the cancelled prefill stopped.
async function checkStoppedMidway(prompt, backlogWhenCancelled) {
  const r = await client.completions.create({ model: MODEL, prompt, max_tokens: 1, temperature: 0 });
  const total = r.usage.prompt_tokens;
  const cached = r.usage.prompt_tokens_details?.cached_tokens ?? 0;
  assert.ok(cached >= total - backlogWhenCancelled,
    `cached_tokens ${cached}: the cancelled request had evaluated at least ${total - backlogWhenCancelled} tokens`);
  assert.ok(cached < total - 1, `cached_tokens ${cached} of ${total}: the cancelled prefill ran to the end`);
  return `${total} prompt tokens, ${cached} evaluated before it ended`;
}

const cases = {
  // The official client aborts its streamed request (AbortController) during the prefill.
  async client_abort() {
    const prompt = longPrompt('Apples');
    const controller = new AbortController();
    const stream = await client.completions.create(
      { model: MODEL, prompt, max_tokens: 4, temperature: 0, stream: true },
      { signal: controller.signal });
    const backlog = await prefillInProgress();
    controller.abort();
    try {
      for await (const _ of stream) { /* aborted: nothing arrives */ }
    } catch (e) {
      assert.ok(e.name === 'AbortError' || /abort/i.test(String(e)), `unexpected error: ${e}`);
    }
    await freed();
    return checkStoppedMidway(prompt, backlog);
  },

  // A raw HTTP client closes its connection during the prefill.
  async disconnect() {
    const prompt = longPrompt('Bicycles');
    const url = new URL(BASE);
    const body = JSON.stringify({ model: MODEL, prompt, max_tokens: 4, temperature: 0, stream: true });
    const sock = net.connect(Number(url.port), url.hostname);
    await new Promise((resolve, reject) => { sock.once('connect', resolve); sock.once('error', reject); });
    const head = new Promise((resolve) => sock.once('data', (d) => resolve(String(d))));
    sock.write(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
               `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    assert.match(await head, /^HTTP\/1\.1 200/);
    const backlog = await prefillInProgress();
    sock.destroy();
    await freed();
    return checkStoppedMidway(prompt, backlog);
  },

  // The two slots now hold the Apples and the Bicycles prompts. A third conversation takes the least
  // recently used slot (Apples'): its state is parked in host memory (--cache-ram), and the Apples prompt
  // comes back from there with only its last token evaluated.
  async host_cache_round_trip() {
    const before = await gauge('gantry_prompt_cache_bytes');
    assert.ok(before !== null, 'no gantry_prompt_cache_bytes gauge');
    await client.completions.create({ model: MODEL, prompt: 'Cherries are red.', max_tokens: 1, temperature: 0 });
    const parked = await gauge('gantry_prompt_cache_bytes');
    assert.ok(parked > before, `gantry_prompt_cache_bytes ${before} -> ${parked}: the Apples slot was not parked`);
    const r = await client.completions.create({ model: MODEL, prompt: longPrompt('Apples'), max_tokens: 1, temperature: 0 });
    const total = r.usage.prompt_tokens;
    const cached = r.usage.prompt_tokens_details?.cached_tokens ?? 0;
    assert.equal(cached, total - 1, `cached_tokens ${cached} of ${total}: not restored from host memory`);
    return `${parked - before} bytes parked, ${cached} of ${total} prompt tokens restored`;
  },
};

let failed = false;
for (const [name, fn] of Object.entries(cases)) {
  try {
    console.log(`ok ${name}: ${await fn()}`);
  } catch (e) {
    console.log(`FAIL ${name}: ${e.stack ?? e}`);
    failed = true;
  }
}
clearTimeout(watchdog);
process.exit(failed ? 1 : 0);
