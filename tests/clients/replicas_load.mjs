// A bounded load through a load balancer (HAProxy) in front of three `gantry serve` replicas, with one
// replica stopped gracefully (SIGTERM) and another killed (SIGKILL) along the way. Driven by
// tests/scripts/replicas_haproxy.sh. Every step waits for an event, never for a fixed time: HAProxy's own
// view of each server (its stats socket), a process having exited, a number of answered requests.
//
//   1. All three replicas UP in HAProxy; the load starts: TOTAL completions, CONCURRENCY at a time.
//   2. After a tenth of them: SIGTERM to r1. It turns unready, HAProxy's health check marks it DOWN,
//      it keeps answering what reaches it meanwhile (--drain-delay), then drains and exits.
//      Expected: no request fails.
//   3. Once r1 has exited (and 30 % are answered): SIGKILL to r2. Expected: only requests r2 holds may
//      fail (the client sees 502s; replicas_haproxy.sh checks in HAProxy's log that each failure was a
//      request routed to r2 and ended by r2's side closing); HAProxy marks r2 DOWN; r3 serves the
//      rest, which all succeed.
// Prints the counts per phase and per replica; exit 1 when an expectation fails.
//
// Environment: LB_URL, STATS_SOCKET, MODEL, PID_R1, PID_R2 (required); TOTAL (2000), CONCURRENCY (8),
// TEST_TIMEOUT_S (240).
import http from 'node:http';
import net from 'node:net';

const env = process.env;
const LB = env.LB_URL;
const SOCK = env.STATS_SOCKET;
const MODEL = env.MODEL;
const PID = { r1: Number(env.PID_R1), r2: Number(env.PID_R2) };
const TOTAL = Number(env.TOTAL ?? 2000);
const CONCURRENCY = Number(env.CONCURRENCY ?? 8);
const TIMEOUT_S = Number(env.TEST_TIMEOUT_S ?? 240);
if (!LB || !SOCK || !MODEL || !PID.r1 || !PID.r2) {
  console.error('FAIL setup: LB_URL, STATS_SOCKET, MODEL, PID_R1 and PID_R2 are required');
  process.exit(2);
}
setTimeout(() => {
  console.error(`FAIL timeout: the run did not finish within ${TIMEOUT_S} s`);
  process.exit(1);
}, TIMEOUT_S * 1000).unref();

// HAProxy's `show stat`, as {server: {status, scur, stot}} for the backend `replicas`.
function stats() {
  return new Promise((resolve, reject) => {
    let out = '';
    const c = net.createConnection(SOCK, () => c.end('show stat\n'));
    c.on('data', (d) => (out += d));
    c.on('error', reject);
    c.on('close', () => {
      const lines = out.trim().split('\n');
      const head = lines[0].replace(/^# /, '').split(',');
      const col = (n) => head.indexOf(n);
      const servers = {};
      for (const l of lines.slice(1)) {
        const f = l.split(',');
        if (f[col('pxname')] !== 'replicas' || f[col('svname')] === 'BACKEND') continue;
        servers[f[col('svname')]] = {
          status: f[col('status')],
          scur: Number(f[col('scur')]),
          stot: Number(f[col('stot')]),
        };
      }
      resolve(servers);
    });
  });
}
// One request on a connection of its own (a client's reused connection is not what is under test).
const agent = new http.Agent({ keepAlive: false });
function post(path, body) {
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${LB}${path}`,
      { method: 'POST', agent, headers: { 'Content-Type': 'application/json' }, timeout: 60_000 },
      (res) => {
        let data = '';
        res.setEncoding('utf8');
        res.on('data', (d) => (data += d));
        res.on('end', () => resolve({ status: res.statusCode, body: data }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end(body);
  });
}
const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};
// Polls `cond` (async) every `ms` until true: the wait is for an event, the period only how often we look.
async function until(what, cond, ms = 20) {
  for (;;) {
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, ms));
  }
}

const events = {}; // name -> sequence number of requests started when it happened
let started = 0;
let answered = 0;
const results = []; // {seq, ok, status, startedPhase, t0, t1}
const phase = () => (events.killed !== undefined ? 'kill' : events.term !== undefined ? 'term' : 'before');

async function one(seq) {
  const t0 = performance.now();
  const startedPhase = phase();
  const killGen = killCount;
  let ok = false;
  let status = 0;
  let why = '';
  try {
    const r = await post(
      '/v1/completions',
      JSON.stringify({ model: MODEL, prompt: `Count to ${seq % 10}`, max_tokens: 16, temperature: 0 }),
    );
    status = r.status;
    ok = r.status === 200 && JSON.parse(r.body).choices?.[0]?.text !== undefined;
    if (!ok) why = r.body.slice(0, 200);
  } catch (e) {
    why = String(e?.code ?? e?.message ?? e);
  }
  // In flight at the kill: started before it, answered after it.
  results.push({
    seq, ok, status, why, startedPhase,
    inflightAtKill: killGen === 0 && killCount === 1,
    endedBeforeKill: killCount === 0,
  });
  answered++;
}

let killCount = 0;
async function worker() {
  while (started < TOTAL) {
    const seq = started++;
    await one(seq);
  }
}

async function orchestrate() {
  // 2. SIGTERM to r1 after a tenth (early: its drain takes seconds, the load may not).
  await until('a tenth answered', async () => answered >= TOTAL / 10);
  const s0 = await stats();
  events.term = started;
  process.kill(PID.r1, 'SIGTERM');
  console.log(`SIGTERM r1 after ${answered} answered (r1 had served ${s0.r1.stot})`);
  await until('HAProxy marks r1 DOWN', async () => (await stats()).r1.status.startsWith('DOWN'));
  console.log(`HAProxy: r1 DOWN after ${answered} answered`);
  await until('r1 exits', async () => !alive(PID.r1));
  events.termDone = started;
  console.log(`r1 exited after ${answered} answered`);
  // 3. SIGKILL to r2 once r1 is gone (and at least 30 % are answered).
  await until('30 % answered', async () => answered >= (TOTAL * 3) / 10);
  const s1 = await stats();
  events.killed = started;
  killCount = 1;
  process.kill(PID.r2, 'SIGKILL');
  console.log(`SIGKILL r2 after ${answered} answered; HAProxy had ${s1.r2.scur} of its sessions open`);
  await until('HAProxy marks r2 DOWN', async () => (await stats()).r2.status.startsWith('DOWN'));
  events.killDown = started;
  console.log(`HAProxy: r2 DOWN after ${answered} answered`);
}

await until('all three replicas UP in HAProxy', async () => {
  const s = await stats();
  return ['r1', 'r2', 'r3'].every((n) => s[n]?.status === 'UP');
});
const before = await stats();
const orchestration = orchestrate();
await Promise.all(Array.from({ length: CONCURRENCY }, worker));
await orchestration; // its events come during the load; the last (r2 DOWN) may come just after it
const after = await stats();

const count = (f) => results.filter(f).length;
const failed = results.filter((r) => !r.ok);
const failedBeforeKill = failed.filter((r) => r.endedBeforeKill);
const afterKillDown = results.filter((r) => events.killDown !== undefined && r.seq >= events.killDown);
console.log(
  `COUNTS total=${results.length} ok=${count((r) => r.ok)} failed=${failed.length} ` +
    `(phase before SIGTERM: ${count((r) => r.startedPhase === 'before' && !r.ok)}, ` +
    `SIGTERM..SIGKILL: ${count((r) => r.startedPhase === 'term' && !r.ok)}, ` +
    `after SIGKILL: ${count((r) => r.startedPhase === 'kill' && !r.ok)}; ` +
    `in flight at SIGKILL: ${count((r) => r.inflightAtKill)}, of which failed ${count((r) => r.inflightAtKill && !r.ok)})`,
);
console.log(
  'SERVED ' +
    ['r1', 'r2', 'r3'].map((n) => `${n}=${after[n].stot - before[n].stot} (${after[n].status})`).join(' '),
);
for (const r of failed.slice(0, 10)) console.log(`  failed #${r.seq}: status ${r.status} ${r.why}`);

let bad = 0;
const expect = (name, cond, why) => {
  console.log(cond ? `ok ${name}` : `FAIL ${name}: ${why}`);
  if (!cond) bad++;
};
expect('every request answered', results.length === TOTAL, `${results.length} of ${TOTAL}`);
expect('the orchestration reached every event', events.killDown !== undefined, JSON.stringify(events));
expect('SIGTERM to r1 lost no request (none failed before the SIGKILL)', failedBeforeKill.length === 0,
  `${failedBeforeKill.length} failed`);
// Which replica held each failed request is HAProxy's to say: replicas_haproxy.sh checks in its log that
// every one was held by r2 (in flight there, or in its accept queue, when it was killed).
console.log(`FAILED ${failed.length}`);
expect(
  'after HAProxy marked r2 DOWN, every request succeeded (r3 serves)',
  afterKillDown.length > 0 && afterKillDown.every((r) => r.ok),
  `${afterKillDown.filter((r) => !r.ok).length} of ${afterKillDown.length} failed`,
);
expect('each replica served requests', ['r1', 'r2', 'r3'].every((n) => after[n].stot > before[n].stot), JSON.stringify(after));
expect('r1 and r2 are DOWN, r3 UP at the end', after.r1.status.startsWith('DOWN') && after.r2.status.startsWith('DOWN') && after.r3.status === 'UP', JSON.stringify(after));
process.exit(bad ? 1 : 0);
