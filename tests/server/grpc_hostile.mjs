// gRPC under attack (issue 34, item 4), over raw HTTP/2 (Node's own http2 module: a gRPC client library
// would never send half a message and stop). Against a `gantry serve` with an API key:
//  1. STREAMS ModelInfer calls without a key, over two connections, each announce a 59 MiB message and
//     send up to 40 MiB of it, a chunk at a time, then pause. Each must be answered UNAUTHENTICATED
//     (grpc-status 16) before its message is complete, and the server's peak RSS (VmHWM) and RSS must not
//     grow by anything like the bytes offered (it used to buffer every message whole before looking at the
//     metadata: +452 MB for 8 x 59 MiB, kept after they left; +324 MiB here, and no answer).
//  2. A ModelInfer with the key and a message over --max-body-size answers RESOURCE_EXHAUSTED (8) with a
//     message stating the limit in bytes (gRPC's own text: its core refuses the message).
//  3. STREAMS ModelInfer calls with the key each send a whole 59 MiB message that does not parse: each is
//     answered INVALID_ARGUMENT (it was UNIMPLEMENTED with no text) or reset ENHANCE_YOUR_CALM once gRPC
//     holds its memory bound (2 x --max-body-size), and the peak RSS stays bounded (+~1 GB before).
//  4. The server still answers: ServerMetadata with the key (OK, "gantry"), without (UNAUTHENTICATED),
//     ServerLive without (OK).
// Prints what it measured; exits 1 on any failed check.
//
// Usage: node grpc_hostile.mjs GRPC_ADDR KEY SERVER_PID MAX_BODY_BYTES [RSS_BOUND_FACTOR]
import fs from 'node:fs';
import http2 from 'node:http2';

const [addr, key, pidArg, maxBodyArg, factorArg] = process.argv.slice(2);
const PID = Number(pidArg);
const MAX_BODY = Number(maxBodyArg);
const FACTOR = Number(factorArg ?? 1);
const MiB = 1 << 20;
const STREAMS = 8;
const ANNOUNCED = 59 * MiB;  // the message length each stream announces: under --max-body-size (64 MiB)
const OFFERED = 40 * MiB;    // how much of it each stream sends at most before it pauses
const CHUNK = 256 * 1024;
const ANSWER_WAIT_MS = 30_000;  // a bound on waiting for an answer (a failure, not a timing assertion)
const RSS_GROWTH_BOUND = 64 * MiB * FACTOR;  // 8 x 40 MiB = 320 MiB offered
// 8 x 59 MiB sent with the key: gRPC holds at most 128 MiB of them; a message read is also copied and parsed.
const FLOOD_GROWTH_BOUND = 512 * MiB * FACTOR;
const INFER = '/inference.GRPCInferenceService/ModelInfer';

const failures = [];
const check = (ok, what) => {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) failures.push(what);
};

function memory() {
  const status = fs.readFileSync(`/proc/${PID}/status`, 'utf8');
  const field = (name) => Number(status.match(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm'))[1]) * 1024;
  return { hwm: field('VmHWM'), rss: field('VmRSS') };
}
const mib = (bytes) => (bytes / MiB).toFixed(1);

// The 5-byte gRPC message prefix: not compressed, then the length (big-endian).
function prefix(length) {
  const b = Buffer.alloc(5);
  b.writeUInt32BE(length, 1);
  return b;
}

// One call on `session`: headers (plus `extra`), a message prefix announcing `announced` bytes, then up
// to `send` bytes of the message, each chunk written once the last one was taken (HTTP/2 flow control
// paces it); ends the stream only when the whole message was sent. Stops sending at the server's answer.
// Resolves with { status, message, sent (bytes of the message sent when the answer came), data }.
function call(session, path, extra, announced, send) {
  return new Promise((resolve) => {
    const stream = session.request({
      ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers', ...extra,
    });
    let sent = 0;
    let answer = null;
    const data = [];
    const timer = setTimeout(() => done({ status: null, message: `no answer within ${ANSWER_WAIT_MS} ms` }),
                             ANSWER_WAIT_MS);
    function done(a) {
      if (answer) return;
      answer = { ...a, sent, data: Buffer.concat(data) };
      clearTimeout(timer);
      if (!stream.destroyed) stream.close(http2.constants.NGHTTP2_CANCEL);
      resolve(answer);
    }
    const take = (h) => {
      if (h['grpc-status'] === undefined) return;
      done({ status: Number(h['grpc-status']), message: decodeURIComponent(h['grpc-message'] ?? '') });
    };
    stream.on('response', take);  // a trailers-only answer carries its status in the headers
    stream.on('trailers', take);
    stream.on('data', (d) => data.push(d));
    stream.on('error', () => {});  // a reset after the answer; no answer is reported by done()
    stream.on('close', () =>
      done({ status: null, rst: stream.rstCode, message: `stream reset (code ${stream.rstCode}) without a status` }));
    const chunk = Buffer.alloc(CHUNK, 0x41);
    const pump = () => {
      if (answer || stream.destroyed) return;
      if (sent >= send) {
        if (sent === announced) stream.end();
        return;  // else: pause, the rest never comes
      }
      const n = Math.min(CHUNK, send - sent);
      stream.write(n === CHUNK ? chunk : chunk.subarray(0, n), (err) => {
        if (err) return;
        sent += n;
        pump();
      });
    };
    stream.write(prefix(announced), (err) => { if (!err) pump(); });
  });
}

const connect = () =>
  new Promise((resolve, reject) => {
    const s = http2.connect(`http://${addr}`);
    s.once('connect', () => resolve(s));
    s.once('error', reject);
  });

const auth = { authorization: `Bearer ${key}` };

// 1. Unauthenticated streams, each offering most of a large message.
const sessions = [await connect(), await connect()];
const before = memory();
const answers = await Promise.all(
  Array.from({ length: STREAMS }, (_, i) => call(sessions[i % 2], INFER, {}, ANNOUNCED, OFFERED)));
const after = memory();
for (const [i, a] of answers.entries()) {
  check(a.status === 16 && a.sent < ANNOUNCED,
        `unauthenticated stream ${i}: grpc-status ${a.status} (want 16) "${a.message}" after ${mib(a.sent)} ` +
        `of the ${mib(ANNOUNCED)} MiB message`);
}
check(answers.every((a) => /API key/.test(a.message)), 'the UNAUTHENTICATED answers say what is missing');
const hwmGrowth = after.hwm - before.hwm;
const rssGrowth = after.rss - before.rss;
console.log(`server memory: VmHWM ${mib(before.hwm)} -> ${mib(after.hwm)} MiB, VmRSS ${mib(before.rss)} -> ` +
            `${mib(after.rss)} MiB; offered ${STREAMS} x ${mib(OFFERED)} MiB`);
check(hwmGrowth < RSS_GROWTH_BOUND, `peak RSS grew by ${mib(hwmGrowth)} MiB (bound ${mib(RSS_GROWTH_BOUND)})`);
check(rssGrowth < RSS_GROWTH_BOUND, `RSS grew by ${mib(rssGrowth)} MiB (bound ${mib(RSS_GROWTH_BOUND)})`);
for (const s of sessions) s.close();

// 2. With the key, a message over --max-body-size, sent whole.
const session = await connect();
const over = MAX_BODY + MiB;
const big = await call(session, INFER, auth, over, over);
session.close();
check(big.status === 8 && big.message.includes(String(MAX_BODY)),
      `a ${mib(over)} MiB message with the key: grpc-status ${big.status} (want 8) "${big.message}"`);

// 3. With the key, STREAMS messages of 59 MiB each, sent whole (not valid messages: INVALID_ARGUMENT once
// read). gRPC holds at most grpc_memory_bound (2 x --max-body-size) of them; the streams over it are reset
// with ENHANCE_YOUR_CALM (11). Every stream must end one of those two ways, and the peak RSS stay bounded.
const flood = [await connect(), await connect()];
const floodBefore = memory();
const floodAnswers = await Promise.all(
  Array.from({ length: STREAMS }, (_, i) => call(flood[i % 2], INFER, auth, ANNOUNCED, ANNOUNCED)));
const floodAfter = memory();
const ends = floodAnswers.map((a) => (a.status !== null ? `status ${a.status}` : `reset ${a.rst}`));
console.log(`${STREAMS} x ${mib(ANNOUNCED)} MiB with the key: ${ends.join(', ')}`);
check(floodAnswers.every((a) => a.status === 3 || a.rst === http2.constants.NGHTTP2_ENHANCE_YOUR_CALM),
      'each message with the key is answered INVALID_ARGUMENT or reset ENHANCE_YOUR_CALM');
console.log(`server memory: VmHWM ${mib(floodBefore.hwm)} -> ${mib(floodAfter.hwm)} MiB, VmRSS ` +
            `${mib(floodBefore.rss)} -> ${mib(floodAfter.rss)} MiB; sent ${STREAMS} x ${mib(ANNOUNCED)} MiB`);
check(floodAfter.hwm - floodBefore.hwm < FLOOD_GROWTH_BOUND,
      `peak RSS grew by ${mib(floodAfter.hwm - floodBefore.hwm)} MiB (bound ${mib(FLOOD_GROWTH_BOUND)}; ` +
      'it was ~1,065 MiB before the gRPC memory bound)');
for (const s of flood) s.close();

// 4. Still serving (on a new connection: under memory pressure gRPC also closes idle ones).
const session2 = await connect();
const metadata = await call(session2, '/inference.GRPCInferenceService/ServerMetadata', auth, 0, 0);
check(metadata.status === 0 && metadata.data.includes('gantry'),
      `ServerMetadata with the key: grpc-status ${metadata.status} (want 0), ${metadata.data.length} bytes`);
const noKey = await call(session2, '/inference.GRPCInferenceService/ServerMetadata', {}, 0, 0);
check(noKey.status === 16, `ServerMetadata without the key: grpc-status ${noKey.status} (want 16)`);
const live = await call(session2, '/inference.GRPCInferenceService/ServerLive', {}, 0, 0);
check(live.status === 0, `ServerLive without the key: grpc-status ${live.status} (want 0)`);
session2.close();

if (failures.length) {
  console.log(`grpc_hostile: ${failures.length} check(s) failed`);
  process.exit(1);
}
console.log('grpc_hostile: all passed');
