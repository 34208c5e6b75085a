// Drives an Ollama-compatible server with the official `ollama` npm client (pinned in package.json) and
// asserts what a real application relies on. Usage:
//   HOST=http://127.0.0.1:PORT MODEL=<served text model> node tests/clients/ollama_client_test.mjs
// MODEL is the name the server lists without its tag ("tiny-llama" for "tiny-llama:latest").
// With API_KEY set, only the authentication checks run: a client sending `Authorization: Bearer <key>`
// works, one without it gets 401.
// The keep-alive checks (load, unload, keep_alive -1) expect a server that loads on demand
// (gantry serve --load-on-demand); KEEP_ALIVE=0 skips them (printed as "skip", never as "ok").
// TOOL_MODELS (comma-separated, default MODEL): the models the tool checks run on (chat with tools,
// streamed and not, a history with tool calls and tool results, show's "tools" capability).
// PULL_MODEL and PULL_CORRUPT: names the server's --pull-source holds, the second with a blob whose
// sha256 does not match its manifest (both required unless API_KEY is set). With API_KEY, the server is
// expected to run without --pull-source (pull answers 501).
// Each check prints "ok <name>"; the first failure of a check prints "FAIL <name>: <why>"; the exit code
// is 1 when any failed. A global timeout (TEST_TIMEOUT_S, default 90) ends a hung run with exit code 1.
import assert from 'node:assert/strict';
import { Ollama } from 'ollama';

const env = process.env;
const HOST = env.HOST ?? 'http://127.0.0.1:11434';
const MODEL = env.MODEL;
const TAGGED = MODEL && (MODEL.includes(':') ? MODEL : `${MODEL}:latest`);
const API_KEY = env.API_KEY ?? '';
const TIMEOUT_S = Number(env.TEST_TIMEOUT_S ?? 90);

if (!MODEL) {
  console.error('FAIL setup: MODEL is not set (the text model the server serves, e.g. tiny-llama)');
  process.exit(2);
}

const watchdog = setTimeout(() => {
  console.error(`FAIL timeout: the checks did not finish within ${TIMEOUT_S} s (server at ${HOST} hung?)`);
  process.exit(1);
}, TIMEOUT_S * 1000);

const TOOL_MODELS = (env.TOOL_MODELS ?? MODEL).split(',').filter((m) => m.length > 0);
const PULL_MODEL = env.PULL_MODEL ?? '';
const PULL_CORRUPT = env.PULL_CORRUPT ?? '';
if (!API_KEY && (!PULL_MODEL || !PULL_CORRUPT)) {
  console.error('FAIL setup: PULL_MODEL and PULL_CORRUPT are not set (models the server\'s --pull-source holds)');
  process.exit(2);
}

const headers = API_KEY ? { Authorization: `Bearer ${API_KEY}` } : undefined;
const ollama = new Ollama({ host: HOST, headers });
const NUM_PREDICT = 16;

// Asserts `fn` rejects with the client's ResponseError carrying HTTP `status`.
async function expectResponseError(fn, status, what) {
  let err = null;
  try {
    await fn();
  } catch (e) {
    err = e;
  }
  assert.ok(err, `${what} succeeded, want HTTP ${status}`);
  assert.equal(err.name, 'ResponseError', `${what}: want a ResponseError, got ${err.name}: ${err.message}`);
  assert.equal(err.status_code, status, `${what}: HTTP ${err.status_code} (${err.message}), want ${status}`);
  assert.ok(typeof err.error === 'string' && err.error.length > 0, `${what}: the error has no message`);
  console.log(`   (${what}: ${err.status_code}: ${err.error.slice(0, 120)})`);
  return err;
}

function assertDate(value, what) {
  const t = Date.parse(value);
  assert.ok(Number.isFinite(t), `${what}: ${JSON.stringify(value)} is not a date`);
  return t;
}

function assertStats(r, what, maxTokens) {
  assert.equal(r.done, true, `${what}: done is not true`);
  assert.ok(['stop', 'length'].includes(r.done_reason), `${what}: done_reason ${JSON.stringify(r.done_reason)}`);
  for (const k of ['total_duration', 'load_duration', 'prompt_eval_count', 'prompt_eval_duration', 'eval_count',
    'eval_duration']) {
    assert.ok(Number.isInteger(r[k]) && r[k] >= 0, `${what}: ${k} is ${JSON.stringify(r[k])}, want an integer >= 0`);
  }
  assert.ok(r.prompt_eval_count > 0, `${what}: prompt_eval_count is 0`);
  assert.ok(r.total_duration > 0, `${what}: total_duration is 0`);
  assert.ok(r.eval_count >= 1 && r.eval_count <= maxTokens, `${what}: eval_count ${r.eval_count} not in 1..${maxTokens}`);
  assert.ok(r.total_duration >= r.eval_duration, `${what}: total_duration < eval_duration (not both nanoseconds?)`);
  if (r.done_reason === 'length') assert.equal(r.eval_count, maxTokens, `${what}: length before num_predict`);
  assertDate(r.created_at, `${what}: created_at`);
}

const checks = [];
const check = (name, fn) => checks.push({ name, fn });

if (API_KEY) {
  check('auth: bearer key accepted', async () => {
    const list = await ollama.list();
    assert.ok(list.models.some((m) => m.name === TAGGED), `${TAGGED} is not listed with the key`);
    const r = await ollama.generate({ model: MODEL, prompt: 'Hi', stream: false, options: { num_predict: 4 } });
    assertStats(r, 'generate with the key', 4);
  });
  check('auth: no key is 401', async () => {
    const anonymous = new Ollama({ host: HOST });
    await expectResponseError(() => anonymous.list(), 401, 'list without a key');
    await expectResponseError(() => anonymous.generate({ model: MODEL, prompt: 'Hi', stream: false }), 401,
      'generate without a key');
    const wrong = new Ollama({ host: HOST, headers: { Authorization: 'Bearer not-the-key' } });
    await expectResponseError(() => wrong.chat({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }] }), 401,
      'chat with a wrong key');
  });
  check('pull without --pull-source', async () => {
    const err = await expectResponseError(() => ollama.pull({ model: 'anything', stream: false }), 501,
      'pull on a server without --pull-source');
    assert.match(err.error, /--pull-source/, 'the error does not say how to turn pulling on');
  });
} else {
  check('version', async () => {
    const v = await ollama.version();
    assert.match(v.version, /^\d+\.\d+\.\d+/, `version ${JSON.stringify(v.version)} is not x.y.z`);
  });

  check('list', async () => {
    const { models } = await ollama.list();
    assert.ok(Array.isArray(models), 'models is not an array');
    const m = models.find((x) => x.name === TAGGED);
    assert.ok(m, `${TAGGED} is not in ${JSON.stringify(models.map((x) => x.name))}`);
    assert.equal(m.model, TAGGED);
    assert.ok(Number.isInteger(m.size) && m.size > 0, `size ${m.size}`);
    assert.match(m.digest, /^[0-9a-f]{64}$/, `digest ${m.digest}`);
    assertDate(m.modified_at, 'modified_at');
    assert.equal(m.details.format, 'gguf');
    assert.ok(m.details.family.length > 0, 'details.family is empty');
    assert.ok(m.details.parameter_size.length > 0, 'details.parameter_size is empty');
    assert.ok(m.details.quantization_level.length > 0, 'details.quantization_level is empty');
  });

  check('show', async () => {
    // The listed name and the bare name both find the model.
    for (const model of [TAGGED, MODEL]) {
      const s = await ollama.show({ model });
      assert.equal(s.details.format, 'gguf', `${model}: details.format`);
      assert.ok(s.details.family.length > 0, `${model}: details.family is empty`);
      assert.equal(typeof s.modelfile, 'string');
      assert.equal(typeof s.parameters, 'string');
      assert.equal(typeof s.template, 'string');
      assert.ok(s.model_info && typeof s.model_info === 'object', `${model}: model_info is not an object`);
      assert.equal(s.model_info['general.architecture'], s.details.family, `${model}: model_info architecture`);
      assert.ok(s.capabilities.includes('completion'), `${model}: capabilities ${JSON.stringify(s.capabilities)}`);
    }
  });

  check('generate', async () => {
    const req = { model: MODEL, prompt: 'Why is the sky blue?', stream: false,
      options: { num_predict: NUM_PREDICT, temperature: 0, seed: 42 } };
    const r = await ollama.generate(req);
    assert.equal(r.model, MODEL, 'the response names another model');
    assert.equal(typeof r.response, 'string');
    assertStats(r, 'generate', NUM_PREDICT);
    // Greedy (temperature 0): the same request gives the same text; a smaller num_predict is obeyed.
    const again = await ollama.generate(req);
    assert.equal(again.response, r.response, 'temperature 0 gave two different answers');
    const short = await ollama.generate({ ...req, options: { ...req.options, num_predict: 2 } });
    assert.ok(short.eval_count <= 2, `num_predict 2 generated ${short.eval_count} tokens`);
  });

  check('generate json', async () => {
    // A schema bounds the document, so it must be complete (done_reason stop) and parse.
    const schema = { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'],
      additionalProperties: false };
    const r = await ollama.generate({ model: MODEL, prompt: 'Answer in JSON: is the sky blue?', stream: false,
      format: schema, options: { num_predict: 128, temperature: 0 } });
    assert.equal(r.done_reason, 'stop', `a bounded schema ended with ${r.done_reason}: ${JSON.stringify(r.response)}`);
    const doc = JSON.parse(r.response);
    assert.equal(typeof doc.ok, 'boolean', `schema output ${r.response}`);
    // "json": any object; the text is always a prefix of one, and all of one when it stopped by itself
    // (a random tiny model rarely closes it within a few tokens; the schema above is the strict check).
    const j = await ollama.generate({ model: MODEL, prompt: 'Reply with a JSON object.', stream: false,
      format: 'json', options: { num_predict: 32, temperature: 0 } });
    assert.ok(j.response.trimStart().startsWith('{'), `format json gave ${JSON.stringify(j.response.slice(0, 80))}`);
    if (j.done_reason === 'stop') {
      const obj = JSON.parse(j.response);
      assert.equal(typeof obj, 'object');
    } else {
      console.log('   (format json: hit num_predict before the object closed; only the prefix was checked)');
    }
  });

  check('chat stream', async () => {
    const stream = await ollama.chat({ model: TAGGED, stream: true,
      messages: [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Tell me a story.' }],
      options: { num_predict: NUM_PREDICT, temperature: 0.8, seed: 7 } });
    const parts = [];
    for await (const part of stream) parts.push(part);
    assert.ok(parts.length >= 3, `only ${parts.length} stream object(s): want several pieces and a final one`);
    const last = parts[parts.length - 1];
    for (const p of parts.slice(0, -1)) {
      assert.equal(p.done, false, 'an object before the last one has done true');
      assert.equal(p.message.role, 'assistant');
      assert.equal(typeof p.message.content, 'string');
      assert.equal(p.model, TAGGED);
    }
    assertStats(last, 'the last stream object', NUM_PREDICT);
    const text = parts.slice(0, -1).map((p) => p.message.content).join('');
    assert.ok(text.length > 0, 'the streamed pieces hold no text');
    assert.equal(last.message.content, '', 'the last object repeats the text');
  });

  check('embed', async () => {
    const one = await ollama.embed({ model: MODEL, input: 'Why is the sky blue?' });
    assert.equal(one.embeddings.length, 1);
    const dims = one.embeddings[0].length;
    assert.ok(dims > 0, 'the embedding has no dimensions');
    assert.ok(one.embeddings[0].every(Number.isFinite), 'the embedding holds non-numbers');
    const norm = Math.hypot(...one.embeddings[0]);
    assert.ok(Math.abs(norm - 1) < 1e-3, `the embedding is not unit length (${norm})`);
    assert.ok(one.prompt_eval_count > 0, 'prompt_eval_count is 0');
    const two = await ollama.embed({ model: TAGGED, input: ['Why is the sky blue?', 'Why is the grass green?'] });
    assert.equal(two.embeddings.length, 2, 'two inputs did not give two vectors');
    assert.ok(two.embeddings.every((v) => v.length === dims), 'the vectors differ in length');
    const same = two.embeddings[0].every((x, i) => Math.abs(x - one.embeddings[0][i]) < 1e-4);
    assert.ok(same, 'the same text embedded twice gave different vectors');
    const differ = two.embeddings[1].some((x, i) => Math.abs(x - two.embeddings[0][i]) > 1e-4);
    assert.ok(differ, 'two different texts gave the same vector');
  });

  check('ps', async () => {
    const { models } = await ollama.ps();
    const m = models.find((x) => x.name === TAGGED);
    assert.ok(m, `${TAGGED} is not running: ${JSON.stringify(models.map((x) => x.name))}`);
    assert.ok(Number.isInteger(m.size) && m.size > 0, `size ${m.size}`);
    assert.ok(Number.isInteger(m.size_vram) && m.size_vram >= 0 && m.size_vram <= m.size, `size_vram ${m.size_vram}`);
    assert.ok(assertDate(m.expires_at, 'expires_at') > Date.now(), 'expires_at is in the past');
    assert.equal(m.details.format, 'gguf');
  });

  check('keep_alive', async () => {
    // -1: stays loaded (expires in the far future); 0 with no prompt: unloaded now; an empty prompt loads it.
    const kept = await ollama.generate({ model: MODEL, prompt: 'Hi', stream: false, keep_alive: -1,
      options: { num_predict: 2 } });
    assert.equal(kept.done, true);
    let m = (await ollama.ps()).models.find((x) => x.name === TAGGED);
    assert.ok(m, 'not running after keep_alive -1');
    const years = (Date.parse(m.expires_at) - Date.now()) / (365 * 24 * 3600e3);
    assert.ok(years > 10, `keep_alive -1 expires in ${years.toFixed(2)} years`);
    await ollama.generate({ model: MODEL, prompt: 'Hi', stream: false, keep_alive: '5m', options: { num_predict: 2 } });
    m = (await ollama.ps()).models.find((x) => x.name === TAGGED);
    const minutes = (Date.parse(m.expires_at) - Date.now()) / 60e3;
    assert.ok(minutes > 4 && minutes <= 5.1, `keep_alive 5m expires in ${minutes.toFixed(2)} minutes`);

    const unloaded = await ollama.generate({ model: MODEL, prompt: '', keep_alive: 0 });
    assert.equal(unloaded.done_reason, 'unload');
    assert.ok(!(await ollama.ps()).models.some((x) => x.name === TAGGED), 'still running after keep_alive 0');
    const loaded = await ollama.chat({ model: MODEL, messages: [] });
    assert.equal(loaded.done_reason, 'load');
    assert.equal(loaded.message.role, 'assistant');
    assert.ok((await ollama.ps()).models.some((x) => x.name === TAGGED), 'not running after a load request');
  });

  check('unknown model', async () => {
    await expectResponseError(() => ollama.generate({ model: 'no-such-model', prompt: 'x', stream: false }), 404,
      'generate');
    await expectResponseError(() => ollama.chat({ model: 'no-such-model:latest', stream: true,
      messages: [{ role: 'user', content: 'x' }] }), 404, 'streamed chat');
    await expectResponseError(() => ollama.show({ model: 'no-such-model' }), 404, 'show');
    await expectResponseError(() => ollama.embed({ model: 'no-such-model', input: 'x' }), 404, 'embed');
    // A bad request is a 400 with Ollama's error shape, not a crash or a 500.
    await expectResponseError(() => ollama.generate({ model: MODEL, prompt: 'x', stream: false,
      options: { temperature: -1 } }), 400, 'negative temperature');
  });

  // Tools: Ollama has no tool_choice, so with random weights a call is likely, not certain. Whenever
  // the model calls, the call must be well formed: the declared function, its arguments an OBJECT the
  // schema allows (the grammar constrains a call once it starts: the enum leaves one value).
  const TIME_TOOL = { type: 'function', function: { name: 'get_time', description: 'The current time in a zone',
    parameters: { type: 'object', properties: { zone: { type: 'string', enum: ['utc'] } }, required: ['zone'] } } };
  const assertCalls = (calls, what) => {
    assert.ok(Array.isArray(calls) && calls.length > 0, `${what}: tool_calls ${JSON.stringify(calls)}`);
    for (const c of calls) {
      assert.equal(c.function.name, 'get_time', `${what}: called ${JSON.stringify(c.function.name)}`);
      const args = c.function.arguments;
      assert.ok(args && typeof args === 'object' && !Array.isArray(args),
        `${what}: arguments ${JSON.stringify(args)} are not an object`);
      assert.deepEqual(args, { zone: 'utc' }, `${what}: arguments outside the schema`);
    }
  };

  check('show capabilities', async () => {
    for (const model of TOOL_MODELS) {
      // From the file when the model is not loaded (load on demand), from the model's chat layer once it is.
      for (const loaded of [false, true]) {
        if (loaded) await ollama.generate({ model, prompt: 'Hi', stream: false, options: { num_predict: 1 } });
        const s = await ollama.show({ model });
        for (const c of ['completion', 'tools', 'embedding']) {
          assert.ok(s.capabilities.includes(c),
            `${model} (loaded ${loaded}): capabilities ${JSON.stringify(s.capabilities)} lack ${c}`);
        }
        assert.ok(!s.capabilities.includes('thinking'), `${model}: a thinking capability its template lacks`);
        // The trained context in model_info; the loaded one as num_ctx once loaded.
        const arch = s.model_info['general.architecture'];
        const trained = s.model_info[`${arch}.context_length`];
        assert.ok(Number.isInteger(trained) && trained > 0, `${model}: ${arch}.context_length is ${trained}`);
        const m = /(^|\n)num_ctx (\d+)/.exec(s.parameters);
        if (loaded) assert.ok(m && Number(m[2]) > 0, `${model}: parameters ${JSON.stringify(s.parameters)} lack num_ctx`);
      }
    }
  });

  check('chat with tools', async () => {
    let calls = 0;
    for (const model of TOOL_MODELS) {
      for (const seed of [1, 2, 3, 4]) {
        const r = await ollama.chat({ model, stream: false, tools: [TIME_TOOL],
          messages: [{ role: 'user', content: 'What time is it in UTC?' }],
          options: { num_predict: 96, seed, temperature: 0.8 } });
        assertStats(r, `${model} seed ${seed}`, 96);
        assert.equal(r.message.role, 'assistant');
        assert.equal(typeof r.message.content, 'string');
        if (r.message.tool_calls !== undefined) {
          assertCalls(r.message.tool_calls, `${model} seed ${seed}`);
          calls++;
        }
      }
    }
    console.log(`   (${calls} answer(s) called the tool)`);
  });

  check('chat with tools stream', async () => {
    let calls = 0;
    for (const model of TOOL_MODELS) {
      for (const seed of [1, 4]) {
        const stream = await ollama.chat({ model, stream: true, tools: [TIME_TOOL],
          messages: [{ role: 'user', content: 'What time is it in UTC?' }],
          options: { num_predict: 96, seed, temperature: 0.8 } });
        const parts = [];
        for await (const part of stream) parts.push(part);
        const last = parts[parts.length - 1];
        assertStats(last, `${model} seed ${seed}: the last stream object`, 96);
        assert.equal(last.message.content, '', 'the last object repeats the text');
        for (const p of parts.slice(0, -1)) {
          assert.equal(p.done, false, 'an object before the last one has done true');
          // Ollama sends each call whole, in one object: never a fragment.
          if (p.message.tool_calls !== undefined) {
            assertCalls(p.message.tool_calls, `${model} seed ${seed} (streamed)`);
            calls += p.message.tool_calls.length;
          }
        }
      }
    }
    console.log(`   (${calls} streamed call(s))`);
  });

  check('chat tool history', async () => {
    // The model called the tool, the tool answered: the next turn renders and answers.
    for (const model of TOOL_MODELS) {
      for (const stream of [false, true]) {
        const req = { model, stream, tools: [TIME_TOOL], options: { num_predict: 8, seed: 3 },
          messages: [
            { role: 'user', content: 'What time is it in UTC?' },
            { role: 'assistant', content: '', tool_calls: [{ function: { name: 'get_time', arguments: { zone: 'utc' } } }] },
            { role: 'tool', content: '12:00', tool_name: 'get_time' },
          ] };
        let r = await ollama.chat(req);
        if (stream) {
          let last = null;
          for await (const part of r) last = part;
          r = last;
        }
        assertStats(r, `${model} history (stream ${stream})`, 8);
        // The repeat (stream) finds the prompt in the cache: only its last token is evaluated again.
        if (!stream) assert.ok(r.prompt_eval_count > 20, `${model}: the history rendered to ${r.prompt_eval_count} tokens`);
      }
    }
    // Bad tools are a 400 naming the field, never a crash.
    await expectResponseError(() => ollama.chat({ model: MODEL, stream: false,
      messages: [{ role: 'user', content: 'x' }], tools: [{ type: 'function', function: { description: 'no name' } }] }),
    400, 'a tool without a name').then((e) => assert.match(e.error, /tools\[0\]\.function\.name/));
    await expectResponseError(() => ollama.chat({ model: MODEL, stream: false,
      messages: [{ role: 'tool', content: 'orphan' }] }), 400, 'a tool result with no call')
      .then((e) => assert.match(e.error, /messages\[0\]/));
    await expectResponseError(() => ollama.chat({ model: MODEL, stream: false, think: true,
      messages: [{ role: 'user', content: 'x' }] }), 400, 'think on a model that does not think')
      .then((e) => assert.match(e.error, /think/));
  });

  check('copy and delete', async () => {
    const copyName = `${MODEL}-copy`;
    await ollama.copy({ source: MODEL, destination: `${copyName}:latest` });
    let names = (await ollama.list()).models.map((m) => m.name);
    assert.ok(names.includes(`${copyName}:latest`), `the copy is not listed: ${JSON.stringify(names)}`);
    assert.ok(names.includes(TAGGED), 'the original is gone after a copy');
    const r = await ollama.generate({ model: copyName, prompt: 'Hi', stream: false, options: { num_predict: 2 } });
    assertStats(r, 'generate with the copy', 2);
    const s = await ollama.show({ model: copyName });
    assert.ok(s.capabilities.includes('completion'));
    await expectResponseError(() => ollama.copy({ source: 'no-such-model', destination: 'x' }), 404, 'copy unknown');
    await expectResponseError(() => ollama.copy({ source: MODEL, destination: '../escape' }), 400, 'copy bad name');

    await ollama.delete({ model: copyName });
    names = (await ollama.list()).models.map((m) => m.name);
    assert.ok(!names.includes(`${copyName}:latest`), 'the deleted copy is still listed');
    await expectResponseError(() => ollama.generate({ model: copyName, prompt: 'x', stream: false }), 404,
      'generate with a deleted name');
    await expectResponseError(() => ollama.delete({ model: copyName }), 404, 'delete twice');
    // The original (which shared the loaded model) still answers.
    const o = await ollama.generate({ model: MODEL, prompt: 'Hi', stream: false, options: { num_predict: 2 } });
    assertStats(o, 'generate with the original after deleting its copy', 2);
  });

  check('pull', async () => {
    const stream = await ollama.pull({ model: PULL_MODEL, stream: true });
    const parts = [];
    for await (const part of stream) parts.push(part);
    const statuses = parts.map((p) => p.status);
    assert.equal(statuses[0], 'pulling manifest', `statuses ${JSON.stringify(statuses)}`);
    assert.equal(statuses[statuses.length - 1], 'success', `statuses ${JSON.stringify(statuses)}`);
    assert.ok(statuses.includes('verifying sha256 digest'), `statuses ${JSON.stringify(statuses)}`);
    const progress = parts.filter((p) => p.digest);
    assert.ok(progress.length >= 2, 'no download progress');
    const total = progress[0].total;
    assert.match(progress[0].digest, /^sha256:[0-9a-f]{64}$/);
    assert.ok(total > 0 && progress.every((p) => p.total === total), 'total changes while pulling');
    for (let i = 1; i < progress.length; i++)
      assert.ok(progress[i].completed >= progress[i - 1].completed, 'completed went backwards');
    assert.equal(progress[progress.length - 1].completed, total, 'the download did not complete');

    const tagged = PULL_MODEL.includes(':') ? PULL_MODEL : `${PULL_MODEL}:latest`;
    assert.ok((await ollama.list()).models.some((m) => m.name === tagged), `${tagged} is not listed after the pull`);
    const r = await ollama.generate({ model: PULL_MODEL, prompt: 'Hi', stream: false, options: { num_predict: 2 } });
    assertStats(r, 'generate with the pulled model', 2);
    // Pulling again is fine (the same file, replaced); stream false answers one object.
    const again = await ollama.pull({ model: PULL_MODEL, stream: false });
    assert.equal(again.status, 'success');
    // Deleting it unloads it: no longer running, no longer served.
    assert.ok((await ollama.ps()).models.some((m) => m.name === tagged), 'the pulled model is not running');
    await ollama.delete({ model: PULL_MODEL });
    assert.ok(!(await ollama.ps()).models.some((m) => m.name === tagged), 'the deleted model is still running');
    await expectResponseError(() => ollama.show({ model: PULL_MODEL }), 404, 'show a deleted model');
  });

  check('pull corrupted', async () => {
    // Streamed: the error arrives as an {"error"} line, which the client throws.
    let err = null;
    try {
      for await (const part of await ollama.pull({ model: PULL_CORRUPT, stream: true })) void part;
    } catch (e) {
      err = e;
    }
    assert.ok(err, 'pulling a corrupted blob succeeded');
    assert.match(err.message, /digest mismatch/, `error ${err.message}`);
    const e = await expectResponseError(() => ollama.pull({ model: PULL_CORRUPT, stream: false }), 400,
      'pull a corrupted blob, not streamed');
    assert.match(e.error, /digest mismatch/);
    const names = (await ollama.list()).models.map((m) => m.name);
    assert.ok(!names.some((n) => n.startsWith(PULL_CORRUPT)), `the corrupted model was added: ${JSON.stringify(names)}`);
    await expectResponseError(() => ollama.pull({ model: 'not-in-the-source', stream: false }), 404,
      'pull a model the source lacks');
    await expectResponseError(() => ollama.pull({ model: 'a/b/c/d', stream: false }), 400, 'pull a bad name');
  });
}

function skipReason(name) {
  if (name === 'keep_alive' && env.KEEP_ALIVE === '0') return 'KEEP_ALIVE=0';
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
    const msg = e?.name === 'ResponseError' ? `HTTP ${e.status_code}: ${e.error}` : e?.message ?? String(e);
    console.log(`FAIL ${name}: ${msg}`);
  }
}
clearTimeout(watchdog);
console.log(failed ? `${failed} check(s) failed against ${HOST}` : `all checks passed against ${HOST}`);
process.exit(failed ? 1 : 0);
