// Overload: 512 keep-alive connections (Node's own http.Agent, as Node clients and SDKs use it) send a fixed
// number of mixed requests — KServe infer on the MLP and Silero, OpenAI completions, model lists, metrics,
// health, some without the key — to a server with a small queue. Every request must get an answer: 200,
// the 401 it asked for, or 429/503 with Retry-After. Prints the counts; exits 1 on any unanswered request.
//
// Usage: node serve_overload.mjs URL KEY [REQUESTS] [CONNECTIONS]
import http from 'node:http';

const [url, key, totalArg, connArg] = process.argv.slice(2);
const TOTAL = Number(totalArg ?? 6000);
const CONNECTIONS = Number(connArg ?? 512);
const target = new URL(url);
const agent = new http.Agent({ keepAlive: true, maxSockets: CONNECTIONS, maxFreeSockets: CONNECTIONS });

const MLP = 'mlp_64_128_10', SILERO = 'silero_vad_v5', LLAMA = 'tiny-llama';
const mlpInput = (rows) => ({
  inputs: [{ name: 'input', datatype: 'FP32', shape: [rows, 64], data: Array.from({ length: rows * 64 }, (_, i) => (i % 7) / 7) }],
});
const silero = {
  inputs: [
    { name: 'input', datatype: 'FP32', shape: [1, 512], data: new Array(512).fill(0.01) },
    { name: 'state', datatype: 'FP32', shape: [2, 1, 128], data: new Array(256).fill(0) },
    { name: 'sr', datatype: 'INT64', shape: [], data: [16000] },
  ],
};

// The i-th request: [method, path, body, with key?, what it may answer besides 200/429/503].
function nth(i) {
  switch (i % 10) {
    case 0: case 1: case 2: return ['POST', `/v2/models/${MLP}/infer`, mlpInput(1 + (i % 4)), true, []];
    case 3: case 4: return ['POST', `/v2/models/${SILERO}/infer`, silero, true, []];
    case 5: return ['POST', '/v1/completions', { model: LLAMA, prompt: 'Once upon a time', max_tokens: 4, seed: i }, true, []];
    case 6: return ['GET', '/v1/models', null, true, []];
    case 7: return ['GET', '/metrics', null, true, []];
    case 8: return ['GET', '/v2/health/ready', null, false, []];
    default:  // without the key: refused from the header, with and without a body to skip
      return i % 20 === 9 ? ['POST', `/v2/models/${MLP}/infer`, mlpInput(1), false, [401]]
                          : ['GET', '/v1/models', null, false, [401]];
  }
}

const counts = new Map();
const problems = [];
let unanswered = 0;

function once(i) {
  const [method, path, body, withKey, alsoOk] = nth(i);
  const data = body ? Buffer.from(JSON.stringify(body)) : null;
  const headers = {};
  if (data) Object.assign(headers, { 'content-type': 'application/json', 'content-length': data.length });
  if (withKey) headers.authorization = `Bearer ${key}`;
  return new Promise((resolve) => {
    const req = http.request({ host: target.hostname, port: target.port, method, path, headers, agent, timeout: 120_000 }, (res) => {
      res.resume();
      res.on('end', () => {
        const s = res.statusCode;
        counts.set(s, (counts.get(s) ?? 0) + 1);
        const retryable = s === 429 || s === 503;
        if (retryable && !res.headers['retry-after']) problems.push(`${method} ${path}: ${s} without Retry-After`);
        if (s !== 200 && !retryable && !alsoOk.includes(s)) problems.push(`${method} ${path}: unexpected ${s}`);
        resolve();
      });
      res.on('error', (e) => { unanswered++; problems.push(`${method} ${path}: response cut: ${e.code ?? e.message}`); resolve(); });
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (e) => { unanswered++; problems.push(`${method} ${path}: no answer: ${e.code ?? e.message}`); resolve(); });
    req.end(data ?? undefined);
  });
}

const t0 = Date.now();
let next = 0;
async function worker() {
  while (next < TOTAL) await once(next++);
}
await Promise.all(Array.from({ length: CONNECTIONS }, worker));
agent.destroy();

const summary = [...counts.entries()].sort((a, b) => a[0] - b[0]).map(([s, n]) => `${s}=${n}`).join(' ');
console.log(`serve_overload: ${TOTAL} requests over ${CONNECTIONS} keep-alive connections in ${((Date.now() - t0) / 1000).toFixed(1)} s: ${summary}, unanswered=${unanswered}`);
for (const p of problems.slice(0, 20)) console.log(`  - ${p}`);
process.exit(unanswered === 0 && problems.length === 0 ? 0 : 1);
