// Drives `gantry serve`'s KServe v2 gRPC service with an independent client: @grpc/grpc-js and
// @grpc/proto-loader (pinned in package.json), loading proto/grpc_predict_v2.proto from this repository,
// so the field numbers are tested as a JavaScript client sees them. Asserts what a KServe or Triton
// client relies on: health, metadata, typed and raw inference (equal to the same request over HTTP
// JSON), Silero VAD with its state, the repository extension, auth, and the errors of bad requests.
// Usage:
//   GRPC_ADDR=127.0.0.1:PORT HTTP_URL=http://127.0.0.1:PORT API_KEY=<key> MAX_BODY=<bytes> \
//     node tests/clients/kserve_grpc_client_test.mjs
// MLP and SILERO name the served models (default mlp_64_128_10 and silero_vad_v5). Each check prints
// "ok <name>"; the first failure prints "FAIL <name>: <why>" and exits 1. A global timeout
// (TEST_TIMEOUT_S, default 60) ends the run with exit code 1 so it never hangs.
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import grpc from '@grpc/grpc-js';
import protoLoader from '@grpc/proto-loader';

const env = process.env;
const GRPC_ADDR = env.GRPC_ADDR ?? '127.0.0.1:8001';
const HTTP_URL = (env.HTTP_URL ?? 'http://127.0.0.1:8080').replace(/\/+$/, '');
const API_KEY = env.API_KEY ?? '';
const MAX_BODY = Number(env.MAX_BODY ?? 0);
const MLP = env.MLP ?? 'mlp_64_128_10';
const SILERO = env.SILERO ?? 'silero_vad_v5';
const TIMEOUT_S = Number(env.TEST_TIMEOUT_S ?? 60);
const here = path.dirname(fileURLToPath(import.meta.url));
const PROTO = env.PROTO ?? path.join(here, '..', '..', 'proto', 'grpc_predict_v2.proto');

const watchdog = setTimeout(() => {
  console.error(`FAIL timeout: the checks did not finish within ${TIMEOUT_S} s (server at ${GRPC_ADDR} hung?)`);
  process.exit(1);
}, TIMEOUT_S * 1000);

// keepCase: the proto's own field names (raw_input_contents); longs as Numbers (shapes are small).
const definition = protoLoader.loadSync(PROTO, { keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true });
const inference = grpc.loadPackageDefinition(definition).inference;
const client = new inference.GRPCInferenceService(GRPC_ADDR, grpc.credentials.createInsecure(), {
  'grpc.max_receive_message_length': -1,
  'grpc.max_send_message_length': -1,
});

function metadata(headers) {
  const md = new grpc.Metadata();
  for (const [k, v] of Object.entries(headers)) md.set(k, v);
  return md;
}
const AUTH = API_KEY ? { authorization: `Bearer ${API_KEY}` } : {};

// Promise of one unary call; rejects with the gRPC error (code, details).
function call(method, request, headers = AUTH) {
  return new Promise((resolve, reject) => {
    client[method](request, metadata(headers), { deadline: Date.now() + 30_000 }, (err, response) =>
      err ? reject(err) : resolve(response),
    );
  });
}

async function rejects(promise, code, phrase, what) {
  try {
    const r = await promise;
    assert.fail(`${what}: expected ${grpc.status[code]}, got a response ${JSON.stringify(r).slice(0, 200)}`);
  } catch (err) {
    if (err instanceof assert.AssertionError) throw err;
    assert.equal(err.code, code, `${what}: code ${grpc.status[err.code]} (${err.details}), want ${grpc.status[code]}`);
    if (phrase) assert.ok(err.details.includes(phrase), `${what}: details ${JSON.stringify(err.details)} lack ${JSON.stringify(phrase)}`);
  }
}

async function http(method, route, body) {
  const headers = { 'content-type': 'application/json' };
  if (API_KEY) headers.authorization = `Bearer ${API_KEY}`;
  const r = await fetch(HTTP_URL + route, { method, headers, body: body ? JSON.stringify(body) : undefined });
  const text = await r.text();
  assert.equal(r.status, 200, `HTTP ${method} ${route}: ${r.status} ${text.slice(0, 300)}`);
  return route === '/metrics' ? text : JSON.parse(text);
}

function assertClose(got, want, what, tol = 1e-5) {
  assert.equal(got.length, want.length, `${what}: ${got.length} values, want ${want.length}`);
  for (let i = 0; i < got.length; ++i) {
    const d = Math.abs(got[i] - want[i]);
    assert.ok(d <= tol * Math.max(1, Math.abs(want[i])), `${what}[${i}]: ${got[i]} vs ${want[i]}`);
  }
}

const f32le = (values) => Buffer.from(new Float32Array(values).buffer);
const i64le = (values) => Buffer.from(new BigInt64Array(values.map(BigInt)).buffer);
function fromF32le(buf) {
  const copy = Buffer.from(buf); // aligned
  return Array.from(new Float32Array(copy.buffer, copy.byteOffset, copy.byteLength / 4));
}

function mlpRows(value, rows) {
  const out = [];
  for (let r = 0; r < rows; ++r) for (let i = 0; i < 64; ++i) out.push(value * ((i % 7) - 3) + r * 0.01);
  return out;
}
// Half a second of a 440 Hz tone at 16 kHz, the first 512 samples.
const audio = Array.from({ length: 512 }, (_, i) => 0.5 * Math.sin((2 * Math.PI * 440 * i) / 16000));

const checks = [];
const check = (name, fn) => checks.push([name, fn]);
let mlpIn, mlpOut; // names from the model's metadata

check('server-live-and-ready-need-no-key', async () => {
  assert.equal((await call('ServerLive', {}, {})).live, true);
  assert.equal((await call('ServerReady', {}, {})).ready, true);
});

check('server-metadata', async () => {
  const m = await call('ServerMetadata', {});
  assert.equal(m.name, 'gantry');
  assert.ok(m.version.length > 0, 'empty version');
  assert.ok(m.extensions.includes('model_repository'), JSON.stringify(m.extensions));
});

check('auth-unauthenticated-without-or-with-a-wrong-key', async () => {
  if (!API_KEY) throw new Error('API_KEY is not set: the auth checks need the server started with a key');
  await rejects(call('ServerMetadata', {}, {}), grpc.status.UNAUTHENTICATED, 'API key', 'no key');
  await rejects(call('ServerMetadata', {}, { authorization: 'Bearer wrong' }), grpc.status.UNAUTHENTICATED, null, 'wrong key');
  await rejects(
    call('ModelInfer', { model_name: MLP, inputs: [] }, {}),
    grpc.status.UNAUTHENTICATED,
    null,
    'infer without key',
  );
  // The other two ways HTTP accepts a key work as metadata too.
  assert.equal((await call('ServerMetadata', {}, { 'api-key': API_KEY })).name, 'gantry');
  assert.equal((await call('ServerMetadata', {}, { 'x-api-key': API_KEY })).name, 'gantry');
});

check('model-metadata-matches-http', async () => {
  const g = await call('ModelMetadata', { name: MLP });
  const h = await http('GET', `/v2/models/${MLP}`);
  assert.equal(g.name, MLP);
  assert.deepEqual(g.versions, h.versions);
  assert.equal(g.platform, h.platform);
  const strip = (ts) => ts.map((t) => ({ name: t.name, datatype: t.datatype, shape: t.shape.map(Number) }));
  assert.deepEqual(strip(g.inputs), h.inputs);
  assert.deepEqual(strip(g.outputs), h.outputs);
  assert.deepEqual(g.inputs[0].shape.map(Number), [-1, 64]);
  assert.equal(g.inputs[0].datatype, 'FP32');
  mlpIn = g.inputs[0].name;
  mlpOut = g.outputs[0].name;
  await rejects(call('ModelMetadata', { name: 'no-such-model' }), grpc.status.NOT_FOUND, 'no-such-model', 'unknown model');
  await rejects(call('ModelMetadata', { name: MLP, version: '7' }), grpc.status.NOT_FOUND, "no version '7'", 'unknown version');
});

check('model-ready', async () => {
  assert.equal((await call('ModelReady', { name: MLP })).ready, true);
  assert.equal((await call('ModelReady', { name: MLP, version: '1' })).ready, true);
  await rejects(call('ModelReady', { name: 'no-such-model' }), grpc.status.NOT_FOUND, 'no-such-model', 'unknown model');
});

let typedResult; // MLP outputs for mlpRows(0.25, 2), typed contents
check('mlp-typed-contents-equal-http-json', async () => {
  const values = mlpRows(0.25, 2);
  const r = await call('ModelInfer', {
    model_name: MLP,
    id: 'req-42',
    inputs: [{ name: mlpIn, datatype: 'FP32', shape: [2, 64], contents: { fp32_contents: values } }],
  });
  assert.equal(r.id, 'req-42');
  assert.equal(r.model_name, MLP);
  assert.equal(r.raw_output_contents.length, 0, 'typed request, raw answer');
  assert.equal(r.outputs.length, 1);
  assert.equal(r.outputs[0].name, mlpOut);
  assert.equal(r.outputs[0].datatype, 'FP32');
  assert.deepEqual(r.outputs[0].shape.map(Number), [2, 10]);
  typedResult = r.outputs[0].contents.fp32_contents;
  assert.equal(typedResult.length, 20);
  const h = await http('POST', `/v2/models/${MLP}/infer`, {
    inputs: [{ name: mlpIn, datatype: 'FP32', shape: [2, 64], data: values }],
  });
  assertClose(typedResult, h.outputs[0].data, 'gRPC typed vs HTTP JSON');
  // The two rows differ (their inputs do), so a mixed-up row would show.
  assert.ok(typedResult.slice(0, 10).some((v, i) => Math.abs(v - typedResult[10 + i]) > 1e-6), 'rows are equal');
});

check('mlp-raw-contents-equal-typed', async () => {
  const values = mlpRows(0.25, 2);
  const r = await call('ModelInfer', {
    model_name: MLP,
    model_version: '1',
    inputs: [{ name: mlpIn, datatype: 'FP32', shape: [2, 64] }],
    outputs: [{ name: mlpOut }],
    raw_input_contents: [f32le(values)],
  });
  assert.equal(r.raw_output_contents.length, 1, 'raw request, typed answer');
  assert.equal(r.outputs[0].contents?.fp32_contents?.length ?? 0, 0, 'both raw and typed contents');
  assert.deepEqual(r.outputs[0].shape.map(Number), [2, 10]);
  assert.equal(r.raw_output_contents[0].length, 80);
  assertClose(fromF32le(r.raw_output_contents[0]), typedResult, 'raw vs typed');
});

check('mlp-32-concurrent-calls-each-get-their-own-rows', async () => {
  // Concurrent calls are batched together; each must get the outputs of its own input.
  const single = async (k) => {
    const r = await call('ModelInfer', {
      model_name: MLP,
      inputs: [{ name: mlpIn, datatype: 'FP32', shape: [1, 64] }],
      raw_input_contents: [f32le(mlpRows(0.01 * (k + 1), 1))],
    });
    return fromF32le(r.raw_output_contents[0]);
  };
  const alone = [];
  for (const k of [0, 31]) alone[k] = await single(k);
  const together = await Promise.all(Array.from({ length: 32 }, (_, k) => single(k)));
  assertClose(together[0], alone[0], 'call 0');
  assertClose(together[31], alone[31], 'call 31');
  assert.ok(together[0].some((v, i) => Math.abs(v - together[31][i]) > 1e-6), 'different inputs, same outputs');
});

const sileroInputs = (raw) => {
  const state = new Array(256).fill(0);
  const inputs = [
    { name: 'input', datatype: 'FP32', shape: [1, 512] },
    { name: 'state', datatype: 'FP32', shape: [2, 1, 128] },
    { name: 'sr', datatype: 'INT64', shape: [] },
  ];
  if (raw) return { inputs, raw_input_contents: [f32le(audio), f32le(state), i64le([16000])] };
  inputs[0].contents = { fp32_contents: audio };
  inputs[1].contents = { fp32_contents: state };
  inputs[2].contents = { int64_contents: [16000] };
  return { inputs };
};

check('silero-with-state-typed-raw-and-http-agree', async () => {
  const typed = await call('ModelInfer', { model_name: SILERO, ...sileroInputs(false) });
  const byName = Object.fromEntries(typed.outputs.map((o) => [o.name, o]));
  assert.ok(byName.output && byName.stateN, `outputs: ${typed.outputs.map((o) => o.name)}`);
  const prob = byName.output.contents.fp32_contents;
  assert.equal(prob.length, 1);
  assert.ok(prob[0] >= 0 && prob[0] <= 1, `probability ${prob[0]}`);
  assert.deepEqual(byName.stateN.shape.map(Number), [2, 1, 128]);
  const stateN = byName.stateN.contents.fp32_contents;
  assert.ok(stateN.some((v) => v !== 0), 'the new state is all zeros');

  const h = await http('POST', `/v2/models/${SILERO}/infer`, {
    inputs: [
      { name: 'input', datatype: 'FP32', shape: [1, 512], data: audio },
      { name: 'state', datatype: 'FP32', shape: [2, 1, 128], data: new Array(256).fill(0) },
      { name: 'sr', datatype: 'INT64', shape: [], data: [16000] },
    ],
  });
  const hBy = Object.fromEntries(h.outputs.map((o) => [o.name, o.data]));
  assertClose(prob, hBy.output, 'silero output gRPC vs HTTP');
  assertClose(stateN, hBy.stateN, 'silero stateN gRPC vs HTTP');

  const raw = await call('ModelInfer', { model_name: SILERO, ...sileroInputs(true) });
  assert.equal(raw.raw_output_contents.length, raw.outputs.length);
  const rawBy = Object.fromEntries(raw.outputs.map((o, i) => [o.name, fromF32le(raw.raw_output_contents[i])]));
  assertClose(rawBy.output, prob, 'silero output raw vs typed');
  assertClose(rawBy.stateN, stateN, 'silero stateN raw vs typed');

  // The state carries over: feeding stateN back changes the answer's state.
  const next = sileroInputs(true);
  next.raw_input_contents[1] = f32le(stateN);
  const second = await call('ModelInfer', { model_name: SILERO, ...next });
  const secondState = fromF32le(second.raw_output_contents[second.outputs.findIndex((o) => o.name === 'stateN')]);
  assert.ok(secondState.some((v, i) => Math.abs(v - stateN[i]) > 1e-7), 'state did not evolve');
});

check('bad-requests-are-refused-with-a-reason', async () => {
  const infer = (req) => call('ModelInfer', { model_name: MLP, ...req });
  await rejects(
    infer({ inputs: [{ name: mlpIn, datatype: 'FP32', shape: [1, 63], contents: { fp32_contents: new Array(63).fill(0) } }] }),
    grpc.status.INVALID_ARGUMENT,
    '64',
    'wrong shape',
  );
  await rejects(
    infer({ inputs: [{ name: mlpIn, datatype: 'INT32', shape: [1, 64], contents: { int_contents: new Array(64).fill(0) } }] }),
    grpc.status.INVALID_ARGUMENT,
    'FP32',
    'wrong datatype',
  );
  await rejects(
    infer({ inputs: [{ name: mlpIn, datatype: 'FP32', shape: [1, 64], contents: { fp32_contents: [1, 2, 3] } }] }),
    grpc.status.INVALID_ARGUMENT,
    'fp32_contents has 3 elements',
    'too few elements',
  );
  await rejects(
    infer({ inputs: [{ name: mlpIn, datatype: 'FP32', shape: [1, 64] }], raw_input_contents: [f32le([1, 2])] }),
    grpc.status.INVALID_ARGUMENT,
    '256 bytes',
    'short raw contents',
  );
  await rejects(
    infer({ inputs: [{ name: mlpIn, datatype: 'FP32', shape: [1, 64] }], raw_input_contents: [f32le(mlpRows(1, 1)), f32le([1])] }),
    grpc.status.INVALID_ARGUMENT,
    'raw_input_contents has 2 entries',
    'raw contents count',
  );
  await rejects(infer({ inputs: [] }), grpc.status.INVALID_ARGUMENT, 'missing', 'no inputs');
  await rejects(
    infer({ inputs: [{ name: 'nope', datatype: 'FP32', shape: [1, 64] }], raw_input_contents: [f32le(mlpRows(1, 1))] }),
    grpc.status.INVALID_ARGUMENT,
    "'nope'",
    'unknown input',
  );
  await rejects(
    infer({ inputs: [{ name: mlpIn, datatype: 'FP32', shape: [1, 64], contents: { fp32_contents: mlpRows(1, 1) } }], outputs: [{ name: 'nope' }] }),
    grpc.status.INVALID_ARGUMENT,
    "'nope'",
    'unknown output',
  );
  await rejects(
    call('ModelInfer', { model_name: 'no-such-model', inputs: [] }),
    grpc.status.NOT_FOUND,
    'no-such-model',
    'unknown model',
  );
  await rejects(
    call('ModelInfer', { model_name: MLP, model_version: '2', inputs: [] }),
    grpc.status.NOT_FOUND,
    "no version '2'",
    'unknown version',
  );
  if (MAX_BODY > 0) {
    // Larger than --max-body-size: refused by gRPC's own limit.
    const rows = Math.ceil(MAX_BODY / 256) + 1;
    await rejects(
      infer({ inputs: [{ name: mlpIn, datatype: 'FP32', shape: [rows, 64] }], raw_input_contents: [Buffer.alloc(rows * 256)] }),
      grpc.status.RESOURCE_EXHAUSTED,
      null,
      'over --max-body-size',
    );
  }
  // The server is still fine.
  assert.equal((await call('ServerLive', {}, {})).live, true);
});

check('repository-index-unload-load', async () => {
  const index = await call('RepositoryIndex', {});
  const states = Object.fromEntries(index.models.map((m) => [m.name, m.state]));
  assert.equal(states[MLP], 'READY', JSON.stringify(index.models));
  assert.equal(states[SILERO], 'READY', JSON.stringify(index.models));
  const http_index = await http('POST', '/v2/repository/index', {});
  assert.deepEqual(index.models.map((m) => m.name).sort(), http_index.map((m) => m.name).sort());

  assert.deepEqual(await call('RepositoryModelUnload', { model_name: SILERO }), {});
  assert.equal((await call('ModelReady', { name: SILERO })).ready, false);
  const ready = await call('RepositoryIndex', { ready: true });
  assert.ok(!ready.models.some((m) => m.name === SILERO), 'an unloaded model listed as ready');
  await rejects(call('ModelInfer', { model_name: SILERO, ...sileroInputs(true) }), grpc.status.UNAVAILABLE, 'load it', 'infer unloaded');
  await rejects(call('RepositoryModelUnload', { model_name: SILERO }), grpc.status.INVALID_ARGUMENT, null, 'unload twice');

  assert.deepEqual(await call('RepositoryModelLoad', { model_name: SILERO }), {});
  assert.equal((await call('ModelReady', { name: SILERO })).ready, true);
  const again = await call('ModelInfer', { model_name: SILERO, ...sileroInputs(true) });
  assert.equal(again.outputs.length, 2);
  await rejects(call('RepositoryModelLoad', { model_name: 'no-such-model' }), grpc.status.NOT_FOUND, 'no-such-model', 'load unknown');
});

check('metrics-count-grpc-requests', async () => {
  const text = await http('GET', '/metrics');
  const line = text.split('\n').find((l) => l.includes('protocol="grpc"') && l.includes(`model="${MLP}"`) && l.includes('code="200"'));
  assert.ok(line, 'no grpc request counter for the MLP in /metrics');
  const unauth = text.split('\n').find((l) => l.includes('protocol="grpc"') && l.includes('code="401"'));
  assert.ok(unauth, 'UNAUTHENTICATED calls are not counted as 401');
});

let failed = false;
for (const [name, fn] of checks) {
  try {
    await fn();
    console.log(`ok ${name}`);
  } catch (err) {
    console.error(`FAIL ${name}: ${err.message}`);
    failed = true;
    break;
  }
}
clearTimeout(watchdog);
client.close();
process.exit(failed ? 1 : 0);
