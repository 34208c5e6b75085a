// Drives gantry serve's dashboard in headless Chromium with playwright-core (pinned in package.json) and
// asserts what a user sees. Usage (tests/scripts/serve_dashboard.sh sets these up):
//   BASE_URL=http://127.0.0.1:PORT API_KEY=<key> NPY_GOOD=<2x64 float32 .npy> NPY_BAD=<not a .npy> \
//     SCREENSHOT=<png path> [CHROMIUM=/usr/bin/chromium] node tests/clients/dashboard_browser_test.mjs
// The server must serve mlp_64_128_10, silero_vad_v5 and tiny-llama, all loaded, with --api-key-file.
// Each check prints "ok <name>"; the first failure prints "FAIL <name>: <why>" (exit 1). Chromium failing to
// start is a failure too (set-up installs it): a missing dependency never passes as a skip.
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';

const env = process.env;
const BASE = (env.BASE_URL ?? 'http://127.0.0.1:8080').replace(/\/+$/, '');
const KEY = env.API_KEY;
const TIMEOUT_S = Number(env.TEST_TIMEOUT_S ?? 120);
const MODELS = ['mlp_64_128_10', 'silero_vad_v5', 'tiny-llama'];
const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
const WAIT = { timeout: 30_000 };

for (const v of ['API_KEY', 'NPY_GOOD', 'NPY_BAD', 'SCREENSHOT']) {
  if (!env[v]) {
    console.error(`FAIL setup: ${v} is not set`);
    process.exit(2);
  }
}

let browser;
const watchdog = setTimeout(async () => {
  console.error(`FAIL timeout: the checks did not finish within ${TIMEOUT_S} s`);
  process.exit(1);
}, TIMEOUT_S * 1000);

async function check(name, fn) {
  try {
    await fn();
    console.log(`ok ${name}`);
  } catch (err) {
    console.error(`FAIL ${name}: ${err.message}`);
    if (browser) await browser.close().catch(() => {});
    process.exit(1);
  }
}

const auth = { Authorization: `Bearer ${KEY}` };
async function status() {
  const r = await fetch(`${BASE}/gantry/status`, { headers: auth });
  assert.equal(r.status, 200, `/gantry/status answered ${r.status}`);
  return r.json();
}

// ------------------------------------------------------------------------------- HTTP-level checks
await check('page and assets need no key and carry CSP, nosniff, no-referrer, ETag', async () => {
  for (const path of ['/', '/dashboard/app.js', '/dashboard/style.css']) {
    const r = await fetch(BASE + path);
    assert.equal(r.status, 200, `${path}: ${r.status}`);
    assert.equal(r.headers.get('content-security-policy'), CSP, `${path}: CSP`);
    assert.equal(r.headers.get('x-content-type-options'), 'nosniff', `${path}: nosniff`);
    assert.equal(r.headers.get('referrer-policy'), 'no-referrer', `${path}: Referrer-Policy`);
    const etag = r.headers.get('etag');
    assert.match(etag ?? '', /^"[0-9a-f]{32}"$/, `${path}: ETag ${etag}`);
    const again = await fetch(BASE + path, { headers: { 'If-None-Match': etag } });
    assert.equal(again.status, 304, `${path}: If-None-Match answered ${again.status}`);
  }
  const js = await fetch(`${BASE}/dashboard/app.js`);
  assert.match(js.headers.get('content-type'), /^text\/javascript/);
  assert.equal((await fetch(`${BASE}/dashboard/nope.js`)).status, 404);
  assert.equal((await fetch(`${BASE}/dashboard/..%2fserver.cpp`)).status, 404);
});

await check('data routes need the key', async () => {
  assert.equal((await fetch(`${BASE}/gantry/status`)).status, 401);
  assert.equal((await fetch(`${BASE}/gantry/models/tiny-llama/pin`, { method: 'POST' })).status, 401);
  const s = await status();
  assert.deepEqual(s.models.map((m) => m.name).sort(), MODELS);
  assert.equal(s.server.api_key_required, true);
});

// ------------------------------------------------------------------------------- the browser
try {
  browser = await chromium.launch({
    executablePath: env.CHROMIUM ?? '/usr/bin/chromium',
    args: ['--no-sandbox'], // runs as root in the build container
    timeout: 30_000,
  });
} catch (err) {
  console.error(`FAIL launch: Chromium (${env.CHROMIUM ?? '/usr/bin/chromium'}) could not start: ${err.message.split('\n')[0]}`);
  clearTimeout(watchdog);
  process.exit(1);
}

const page = await browser.newPage({ viewport: { width: 1440, height: 1000 } });
const consoleErrors = [];
let keyEntered = false;
page.on('console', (msg) => {
  if (msg.type() !== 'error') return;
  // The page's first request, before it has a key, is answered 401 by design: Chromium logs that.
  if (!keyEntered && /status of 401/.test(msg.text())) return;
  consoleErrors.push(msg.text());
});
page.on('pageerror', (err) => consoleErrors.push(`uncaught: ${err.message}`));
const row = (name) => page.locator(`#model-rows tr[data-model="${name}"]`);

await check('the key form appears and, with the key, the models are listed ready', async () => {
  await page.goto(`${BASE}/`);
  await page.locator('#key-panel').waitFor({ state: 'visible', ...WAIT });
  assert.equal(await page.locator('#main').isVisible(), false, 'data is shown before a key was entered');
  keyEntered = true;
  await page.fill('#key-input', KEY);
  await page.click('#key-save');
  for (const m of MODELS) await page.locator(`#model-rows tr[data-model="${m}"][data-state="ready"]`).waitFor(WAIT);
  assert.equal(await page.locator('#key-panel').isVisible(), false);
  const stored = await page.evaluate(() => sessionStorage.getItem('gantry.apiKey'));
  assert.equal(stored, KEY, 'the key is not in sessionStorage');
  assert.ok(!page.url().includes(KEY), 'the key is in the URL');
  for (const m of MODELS) {
    assert.equal(await row(m).locator('.state').textContent(), 'ready');
    assert.notEqual((await row(m).locator('td').nth(3).textContent()).trim(), '–', `${m}: no backend shown`);
  }
  assert.match(await page.locator('#machine-summary').textContent(), /cores/);
});

await check('the budget bar has a segment per loaded model', async () => {
  for (const m of MODELS) {
    await page.locator(`#budgets .segment[data-owner="${m}"]`).first().waitFor(WAIT);
  }
  const width = await page.locator('#budgets .segment[data-owner="tiny-llama"]').first().evaluate((e) => e.getBoundingClientRect().width);
  assert.ok(width > 0, 'the tiny-llama segment has no width');
});

await check('live figures refresh from the server metrics', async () => {
  const before = Number(await page.locator('#stat-requests').textContent());
  assert.ok(Number.isFinite(before), 'requests is not a number');
  const r = await fetch(`${BASE}/v2/models/mlp_64_128_10/infer`, {
    method: 'POST',
    headers: { ...auth, 'Content-Type': 'application/json' },
    body: JSON.stringify({ inputs: [{ name: 'input', shape: [1, 64], datatype: 'FP32', data: Array(64).fill(0.5) }] }),
  });
  await r.text();
  await page.waitForFunction((b) => Number(document.getElementById('stat-requests').textContent) > b, before, WAIT);
  await page.waitForFunction(() => document.getElementById('stat-p50').textContent !== '–', null, WAIT);
});

await check('chat: tokens stream into the page, tokens/s shown', async () => {
  await page.selectOption('#chat-model', 'tiny-llama');
  await page.fill('#chat-max-tokens', '48');
  await page.fill('#chat-seed', '7');
  // Record every distinct text the assistant message shows while it streams.
  await page.evaluate(() => {
    window.__snapshots = [];
    new MutationObserver(() => {
      const t = document.querySelector('#chat-log .msg.assistant:last-child .text');
      const text = t ? t.textContent : '';
      if (text && window.__snapshots[window.__snapshots.length - 1] !== text) window.__snapshots.push(text);
    }).observe(document.getElementById('chat-log'), { subtree: true, childList: true, characterData: true });
  });
  await page.fill('#chat-input', 'Tell me a long story about a robot.');
  await page.click('#chat-send');
  const done = page.locator('#chat-log .msg.assistant[data-state="done"]');
  await done.waitFor(WAIT);
  const snapshots = await page.evaluate(() => window.__snapshots);
  assert.ok(snapshots.length >= 2, `the reply appeared in ${snapshots.length} update(s), not streamed`);
  assert.ok(snapshots.every((s, i) => i === 0 || s.startsWith(snapshots[i - 1])), 'updates do not append');
  assert.match(await page.locator('#chat-status').textContent(), /done .*tokens\/s/);
});

await check('chat: stop cancels the stream and the server stops generating', async () => {
  await page.fill('#chat-max-tokens', '4000');
  await page.fill('#chat-input', 'Write as much as you can.');
  const gen0 = (await status()).totals.generated_tokens;
  await page.click('#chat-send');
  await page.waitForFunction(
    () => (document.querySelector('#chat-log .msg.assistant:last-child .text')?.textContent ?? '').length > 0,
    null,
    WAIT,
  );
  assert.equal(await page.locator('#chat-stop').isEnabled(), true, 'stop is disabled while streaming');
  const stopAt = Date.now();
  await page.click('#chat-stop');
  await page.locator('#chat-log .msg.assistant:last-child[data-state="stopped"]').waitFor({ timeout: 5_000 });
  assert.match(await page.locator('#chat-status').textContent(), /^stopped/);
  assert.equal(await page.locator('#chat-send').isEnabled(), true);
  // The server saw the client go: nothing stays in flight and far fewer than 4000 tokens were made.
  const deadline = Date.now() + 10_000;
  let s;
  do {
    s = await status();
    if (s.gauges.inflight_requests === 0 && s.totals.generated_tokens > gen0) break;
    await new Promise((r) => setTimeout(r, 200));
  } while (Date.now() < deadline);
  assert.equal(s.gauges.inflight_requests, 0, 'the generation is still in flight after stop');
  const made = s.totals.generated_tokens - gen0;
  console.log(`  the server ended the generation within ${Date.now() - stopAt} ms of stop, after ${made} tokens`);
  assert.ok(made < 4000, `the server generated ${made} tokens: not cancelled`);
});

await check('ONNX form: a bad file gets a clear error, a good .npy runs the MLP', async () => {
  await page.selectOption('#onnx-model', 'mlp_64_128_10');
  const file = page.locator('#onnx-inputs input[type=file]').first();
  await file.waitFor(WAIT);
  await file.setInputFiles(env.NPY_BAD);
  await page.click('#onnx-run');
  await page.waitForFunction(() => document.getElementById('onnx-error').textContent.includes('not a .npy file'), null, WAIT);
  await file.setInputFiles(env.NPY_GOOD);
  await page.click('#onnx-run');
  const out = page.locator('#onnx-outputs tr').first();
  await out.waitFor(WAIT);
  assert.equal(await out.getAttribute('data-shape'), '2,10');
  assert.equal(await page.locator('#onnx-error').textContent(), '');
});

await check('pin toggles pinned', async () => {
  await row('mlp_64_128_10').locator('button[data-action="pin"]').click();
  await page.locator('#model-rows tr[data-model="mlp_64_128_10"][data-pinned="true"]').waitFor(WAIT);
  assert.equal((await status()).models.find((m) => m.name === 'mlp_64_128_10').pinned, true);
  // The memory view's owner says so too: pinned is the model manager's fact, the budget only counts bytes.
  const owners = (await status()).budgets.flatMap((b) => b.owners);
  assert.ok(owners.some((o) => o.owner === 'mlp_64_128_10' && o.pinned === true), JSON.stringify(owners));
  assert.ok(owners.filter((o) => o.owner !== 'mlp_64_128_10').every((o) => o.pinned === false), JSON.stringify(owners));
  await page.waitForTimeout(1200); // let a poll show the pinned legend in the screenshot
});

await check('screenshot', async () => {
  await page.screenshot({ path: env.SCREENSHOT, fullPage: true });
});

await check('unpin, then unload tiny-llama with its button', async () => {
  await row('mlp_64_128_10').locator('button[data-action="pin"]').click();
  await page.locator('#model-rows tr[data-model="mlp_64_128_10"][data-pinned="false"]').waitFor(WAIT);
  await row('tiny-llama').locator('button[data-action="unload"]').click();
  await page.locator('#model-rows tr[data-model="tiny-llama"][data-state="unloaded"]').waitFor(WAIT);
  assert.equal(await row('tiny-llama').locator('button[data-action="load"]').isEnabled(), true);
  await page.waitForFunction(() => !document.querySelector('#budgets .segment[data-owner="tiny-llama"]'), null, WAIT);
});

await check('pinning an unloaded or unknown model is refused with a reason', async () => {
  const unloaded = await fetch(`${BASE}/gantry/models/tiny-llama/pin`, { method: 'POST', headers: auth });
  assert.equal(unloaded.status, 409);
  assert.match((await unloaded.json()).error, /is unloaded and only a loaded model can be pinned: load it first/);
  const unknown = await fetch(`${BASE}/gantry/models/no-such-model/pin`, { method: 'POST', headers: auth });
  assert.equal(unknown.status, 404);
  assert.equal((await fetch(`${BASE}/gantry/models/tiny-llama/pin`, { headers: auth })).status, 405);
});

await check('load tiny-llama again with its button', async () => {
  await row('tiny-llama').locator('button[data-action="load"]').click();
  await page.locator('#model-rows tr[data-model="tiny-llama"][data-state="ready"]').waitFor(WAIT);
  await page.locator('#budgets .segment[data-owner="tiny-llama"]').first().waitFor(WAIT);
});

await check('no console errors', async () => {
  assert.deepEqual(consoleErrors, []);
});

await browser.close();
clearTimeout(watchdog);
