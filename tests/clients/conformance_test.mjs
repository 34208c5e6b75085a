// The conformance suite (tests/scripts/serve_conformance.sh starts the server; docs/conformance.md):
// every response body and every stream event (SSE and NDJSON) `gantry serve` sends, over every protocol,
// validated against the official definitions pinned in tests/conformance/specs (provenance in its
// README.md) with ajv: $ref, nullable and discriminators resolved as OpenAPI defines them, every required
// field checked (a required nullable field must be sent, as null). A violation prints the case, the JSON
// path, what the spec wants and what was sent. Prints `conformance: PROTOCOL passed/total` per protocol
// and exits 1 unless every case passed.
//
// Environment: BASE_URL (http://127.0.0.1:PORT), API_KEY, CHAT_MODEL (a llama.cpp chat model), TOOLS_MODEL
// (one with a tool-calling template), RERANK_MODEL, TENSOR_MODEL (an ONNX model with input `input`
// [1,64] FP32), ONLY (a regular expression: run the matching cases only; for debugging).
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Ajv2020 from 'ajv/dist/2020.js';
import AjvDraft7 from 'ajv';
import addFormats from 'ajv-formats';

const SPECS = join(dirname(fileURLToPath(import.meta.url)), '..', 'conformance', 'specs');
const BASE = process.env.BASE_URL;
const KEY = process.env.API_KEY;
const CHAT = process.env.CHAT_MODEL;
const TOOLS = process.env.TOOLS_MODEL;
const RERANK = process.env.RERANK_MODEL;
const TENSOR = process.env.TENSOR_MODEL;
const ONLY = process.env.ONLY ? new RegExp(process.env.ONLY) : null;
for (const [k, v] of Object.entries({ BASE_URL: BASE, API_KEY: KEY, CHAT_MODEL: CHAT, TOOLS_MODEL: TOOLS, RERANK_MODEL: RERANK, TENSOR_MODEL: TENSOR })) {
  if (!v) {
    console.error(`FAIL: ${k} is not set`);
    process.exit(1);
  }
}

// ------------------------------------------------------------------ the definitions
// Ajv's discriminator keyword needs every oneOf branch to fix the property with a const/enum (OpenAPI's
// mapping must agree with those values: it is checked here, then dropped, since ajv reads the consts).
// A discriminator ajv cannot read (over anyOf, or a branch without a const) is removed and its
// oneOf/anyOf still validates every branch; the count is printed.
function prepare(doc) {
  let dropped = 0;
  const lookup = (ref) => ref.slice(2).split('/').reduce((n, p) => n?.[p.replace(/~1/g, '/').replace(/~0/g, '~')], doc);
  const resolve = (s) => (s && s.$ref ? resolve(lookup(s.$ref)) : s);
  const fixes = (branch, prop) => {
    const b = resolve(branch);
    if (!b || !b.properties) return false;
    const p = resolve(b.properties[prop]);
    return !!p && (p.const !== undefined || Array.isArray(p.enum)) && (b.required || []).includes(prop);
  };
  // OpenAPI 3.0's `nullable: true` (which OpenAI's 3.1 document also uses) lets null through whatever
  // the rest of the schema says, an enum included (as openapi-schema-to-json-schema converts it, adding
  // null to the enum): it becomes anyOf [schema, null].
  const nullable = (n) => {
    if (Array.isArray(n)) return n.forEach(nullable);
    if (!n || typeof n !== 'object') return;
    Object.values(n).forEach(nullable);
    if (n.nullable === true) {
      const rest = { ...n };
      delete rest.nullable;
      for (const k of Object.keys(n)) delete n[k];
      n.anyOf = [rest, { type: 'null' }];
    }
  };
  nullable(doc.components);
  nullable(doc.paths);
  const walk = (n) => {
    if (Array.isArray(n)) return n.forEach(walk);
    if (!n || typeof n !== 'object') return;
    if (n.discriminator) {
      const prop = n.discriminator.propertyName;
      if (!Array.isArray(n.oneOf) || !n.oneOf.every((b) => fixes(b, prop))) {
        delete n.discriminator;
        dropped++;
      } else {
        n.discriminator = { propertyName: prop };
      }
    }
    Object.values(n).forEach(walk);
  };
  walk(doc);
  return dropped;
}

const ajv2020 = new Ajv2020({ strict: false, allErrors: true, discriminator: true, validateFormats: true });
const ajv7 = new AjvDraft7({ strict: false, allErrors: true, discriminator: true, validateFormats: true });
for (const ajv of [ajv2020, ajv7]) {
  addFormats(ajv);
  // OpenAI's own format: seconds since the Unix epoch.
  ajv.addFormat('unixtime', { type: 'number', validate: (x) => Number.isInteger(x) && x >= 0 });
}
const DOCS = {};
for (const [name, file] of [
  ['openai', 'openai.json'],
  ['anthropic', 'anthropic.json'],
  ['oip', 'oip_rest.json'],
  ['ollama', 'ollama.json'],
  ['cohere', 'cohere.json'],
]) {
  const doc = JSON.parse(readFileSync(join(SPECS, file), 'utf8'));
  if (name === 'openai') {
    // The legacy completions stream has no schema in the document: its events are Completion objects
    // (as the SDK types them) whose finish_reason is null until a choice ends and whose usage is null
    // but in the last, as CreateChatCompletionStreamResponse says of chat chunks. That schema, so
    // relaxed, is added here under a name of the suite's own (README.md).
    const c = structuredClone(doc.components.schemas.CreateCompletionResponse);
    const item = c.properties.choices.items;
    item.properties.finish_reason = { anyOf: [item.properties.finish_reason, { type: 'null' }] };
    c.properties.usage = { anyOf: [c.properties.usage, { type: 'null' }] };
    doc.components.schemas['x-gantry-CompletionStreamChunk'] = c;
    // The stored messages of a chat completion are the request's messages (the reference's own
    // example lists a "user" one), but ChatCompletionMessageList types each as the model's answer
    // (ChatCompletionResponseMessage: role "assistant" only). The suite's copy lets every chat role
    // through and keeps the rest (README.md).
    const list = structuredClone(doc.components.schemas.ChatCompletionMessageList);
    list.properties.data.items = {
      allOf: [
        { ...list.properties.data.items, allOf: list.properties.data.items.allOf.map((x) => (x.$ref ? { $ref: '#/components/schemas/x-gantry-StoredMessage' } : x)) },
      ],
    };
    const msg = structuredClone(doc.components.schemas.ChatCompletionResponseMessage);
    msg.properties.role = { type: 'string', enum: ['system', 'developer', 'user', 'assistant', 'tool'] };
    doc.components.schemas['x-gantry-StoredMessage'] = msg;
    doc.components.schemas['x-gantry-ChatCompletionMessageList'] = list;
  }
  const dropped = prepare(doc);
  const ajv = doc.openapi.startsWith('3.0') ? ajv7 : ajv2020;
  ajv.addSchema(doc, name);
  DOCS[name] = { doc, ajv, dropped };
}

const esc = (p) => encodeURIComponent(String(p).replace(/~/g, '~0').replace(/\//g, '~1'));
const compiled = new Map();
// The validator of the response (status, content type) of `method path` in spec `name`; a status the
// path does not list falls back to `default`, then to the protocol's error body (`errorSchema`).
function validatorFor(name, path, method, status, type, errorSchema) {
  const key = [name, path, method, status, type, errorSchema].join(' ');
  if (compiled.has(key)) return compiled.get(key);
  const { doc, ajv } = DOCS[name];
  const op = doc.paths[path]?.[method];
  if (!op) throw new Error(`spec ${name} has no ${method.toUpperCase()} ${path}`);
  let ref = null;
  for (const code of [String(status), 'default']) {
    let resp = op.responses[code];
    let at = `#/paths/${esc(path)}/${method}/responses/${code}`;
    if (resp && resp.$ref) {
      at = '#' + resp.$ref.slice(1).split('/').map((p) => encodeURIComponent(p)).join('/');
      resp = resp.$ref.slice(2).split('/').reduce((n, p) => n[p], doc);
    }
    if (resp && resp.content && resp.content[type]?.schema) {
      ref = `${name}${at}/content/${esc(type)}/schema`;
      break;
    }
  }
  if (!ref && status >= 400 && errorSchema) ref = `${name}#/components/schemas/${errorSchema}`;
  if (!ref) throw new Error(`spec ${name}: ${method.toUpperCase()} ${path} defines no ${status} ${type} body`);
  const v = ajv.compile({ $ref: ref });
  compiled.set(key, v);
  return v;
}

// Whether the spec gives a body for a success (the health endpoints and Responses' DELETE give none: any
// body passes).
function specifiesBody(name, path, method, status) {
  const resp = DOCS[name].doc.paths[path]?.[method]?.responses?.[String(status)];
  return !!(resp && (resp.$ref || resp.content));
}

const show = (v) => {
  const s = v === undefined ? '(nothing)' : JSON.stringify(v);
  return s.length > 240 ? s.slice(0, 240) + '…' : s;
};
const at = (obj, pointer) =>
  pointer
    .split('/')
    .slice(1)
    .reduce((n, p) => (n == null ? undefined : n[p.replace(/~1/g, '/').replace(/~0/g, '~')]), obj);

// The violations of `body` (an object) against a compiled validator: one line each, deepest first.
function violations(v, body, where) {
  if (v(body)) return [];
  // Of a oneOf/anyOf over objects told apart by `type`, the branches the value's type does not select
  // only say "type must be X": left out when the selected branch has something to say.
  let errs = [...v.errors].filter((e) => e.keyword !== 'anyOf' && e.keyword !== 'oneOf');
  const branchMiss = (e) => (e.keyword === 'enum' || e.keyword === 'const') && /\/type$/.test(e.instancePath);
  if (errs.some((e) => !branchMiss(e))) errs = errs.filter((e) => !branchMiss(e));
  if (!errs.length) errs = [...v.errors];
  errs.sort((a, b) => b.instancePath.length - a.instancePath.length);
  const seen = new Set();
  const out = [];
  for (const e of errs) {
    const path = e.instancePath || '/';
    let want = e.message;
    if (e.keyword === 'required') want = `required property '${e.params.missingProperty}'`;
    else if (e.keyword === 'enum') want = `one of ${JSON.stringify(e.params.allowedValues)}`;
    else if (e.keyword === 'const') want = `the constant ${JSON.stringify(e.params.allowedValue)}`;
    else if (e.keyword === 'additionalProperties') want = `no property '${e.params.additionalProperty}'`;
    const sent = e.keyword === 'required' ? at(body, e.instancePath)?.[e.params.missingProperty] : at(body, e.instancePath);
    const line = `${where}${path}: the spec wants ${want} (${e.schemaPath}); sent ${show(sent)}`;
    if (!seen.has(line)) {
      seen.add(line);
      out.push(line);
    }
    if (out.length >= 8) break;
  }
  return out;
}

// ------------------------------------------------------------------ HTTP
async function send(method, path, body, headers = {}) {
  const h = { authorization: `Bearer ${KEY}`, ...headers };
  if (body !== undefined) h['content-type'] = 'application/json';
  const r = await fetch(BASE + path, {
    method,
    headers: h,
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    signal: AbortSignal.timeout(120000),
  });
  const text = await r.text();
  return { status: r.status, type: (r.headers.get('content-type') || '').split(';')[0].trim(), text, headers: r.headers };
}

// SSE: [{event, data}] of the stream (data parsed unless it is [DONE]).
function parseSse(text) {
  const events = [];
  for (const block of text.split(/\r?\n\r?\n/)) {
    if (!block.trim()) continue;
    let event = null;
    const data = [];
    for (const line of block.split(/\r?\n/)) {
      if (line.startsWith(':')) continue;
      if (line.startsWith('event:')) event = line.slice(6).trim();
      else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
    }
    if (!data.length) continue;
    const raw = data.join('\n');
    events.push({ event, raw, data: raw === '[DONE]' ? '[DONE]' : JSON.parse(raw) });
  }
  return events;
}

// ------------------------------------------------------------------ cases
const results = {}; // protocol -> {passed, total}
const failures = [];

// One case: sends the request, checks the status, validates the body (or each stream event) against
// the spec, then runs `extra` (checks the spec states in prose; returns a list of problems).
// spec: [name, path template, method, errorSchema]; stream: 'sse' | 'ndjson' | undefined.
// eventsAs: the component the stream's events follow, where the spec gives the stream no schema of its
// own (OpenAI's legacy completions).
// decode: turns the body into what the spec describes before it is validated (base64 embeddings).
// bodyAs: the same for a 200 body the suite validates against its relaxed copy of the spec's schema.
async function check(protocol, name, { method = 'POST', path, body, headers, status = 200, spec, stream, eventsAs, bodyAs, decode, extra }) {
  if (ONLY && !ONLY.test(`${protocol} ${name}`)) return undefined;
  const tally = (results[protocol] ??= { passed: 0, total: 0 });
  tally.total++;
  const problems = [];
  let r = null;
  let parsed = null;
  try {
    r = await send(method, path, body, headers);
    if (r.status !== status) problems.push(`status ${r.status}, wanted ${status}: ${show(r.text)}`);
    const [docName, tmpl, m, errorSchema] = spec;
    if (stream && r.status === 200) {
      const type = stream === 'sse' ? 'text/event-stream' : 'application/x-ndjson';
      if (r.type !== type) problems.push(`content-type ${r.type}, wanted ${type}`);
      const v = eventsAs ? DOCS[docName].ajv.compile({ $ref: `${docName}#/components/schemas/${eventsAs}` }) : validatorFor(docName, tmpl, m, r.status, type, errorSchema);
      const events =
        stream === 'sse'
          ? parseSse(r.text)
          : r.text
              .split('\n')
              .filter((l) => l.trim())
              .map((l) => ({ event: null, data: JSON.parse(l) }));
      if (!events.length) problems.push('an empty stream');
      events.forEach((e, i) => {
        if (e.data === '[DONE]') return;
        problems.push(...violations(v, e.data, `event ${i}${e.event ? ` (${e.event})` : ''} `));
      });
      parsed = events;
    } else if (r.status !== 204 && !(r.status < 300 && !specifiesBody(docName, tmpl, m, r.status))) {
      if (r.type !== 'application/json') problems.push(`content-type ${r.type}, wanted application/json`);
      parsed = JSON.parse(r.text);
      if (decode && r.status === 200) parsed = decode(parsed);
      const v =
        bodyAs && r.status === 200
          ? DOCS[docName].ajv.compile({ $ref: `${docName}#/components/schemas/${bodyAs}` })
          : validatorFor(docName, tmpl, m, r.status, 'application/json', errorSchema);
      problems.push(...violations(v, parsed, 'body '));
    }
    if (extra && problems.length === 0) problems.push(...((await extra(parsed, r)) || []));
  } catch (e) {
    problems.push(`${e.message}${r ? `; sent ${show(r.text)}` : ''}`);
  }
  if (problems.length) {
    failures.push(`${protocol} ${name}`);
    console.log(`FAIL ${protocol}: ${name}`);
    for (const p of problems) console.log(`    ${p}`);
  } else {
    tally.passed++;
    console.log(`ok   ${protocol}: ${name}`);
  }
  return parsed;
}

const need = (cond, what) => (cond ? [] : [what]);

// ---- OpenAI: models, chat, completions, embeddings, stored chat completions
const OA = (path, m = 'post') => ['openai', path, m, 'ErrorResponse'];
const weather = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
};
const timeTool = {
  type: 'function',
  function: { name: 'get_time', description: 'The time in a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
};
const hi = [{ role: 'user', content: 'Say hello.' }];
const chatBody = (extra = {}) => ({ model: CHAT, messages: hi, max_tokens: 8, ...extra });
const countCalls = (events) => {
  const idx = new Set();
  for (const e of events) if (e.data !== '[DONE]') for (const c of e.data.choices || []) for (const t of c.delta?.tool_calls || []) idx.add(t.index);
  return idx.size;
};

async function openai() {
  const P = 'openai';
  await check(P, 'GET /v1/models', { method: 'GET', path: '/v1/models', spec: OA('/models', 'get') });
  await check(P, 'GET /v1/models/{model}', { method: 'GET', path: `/v1/models/${CHAT}`, spec: OA('/models/{model}', 'get') });
  await check(P, 'GET /v1/models/{model} unknown: 404', { method: 'GET', path: '/v1/models/no-such-model', status: 404, spec: OA('/models/{model}', 'get') });
  await check(P, 'chat: plain', { path: '/v1/chat/completions', body: chatBody(), spec: OA('/chat/completions') });
  await check(P, 'chat: system + multi-turn', {
    path: '/v1/chat/completions',
    body: chatBody({ messages: [{ role: 'system', content: 'Be brief.' }, ...hi, { role: 'assistant', content: 'Hello.' }, { role: 'user', content: [{ type: 'text', text: 'Again.' }] }] }),
    spec: OA('/chat/completions'),
  });
  await check(P, 'chat: n=2, seed, stop, logprobs', {
    path: '/v1/chat/completions',
    body: chatBody({ n: 2, seed: 7, temperature: 0.8, stop: ['\n\n'], logprobs: true, top_logprobs: 2 }),
    spec: OA('/chat/completions'),
    extra: (b) => need(b.choices.length === 2, `${b.choices.length} choices, wanted 2`),
  });
  await check(P, 'chat: streamed', { path: '/v1/chat/completions', body: chatBody({ stream: true }), spec: OA('/chat/completions'), stream: 'sse' });
  await check(P, 'chat: streamed, include_usage (usage null before the last chunk)', {
    path: '/v1/chat/completions',
    body: chatBody({ stream: true, stream_options: { include_usage: true }, logprobs: true, top_logprobs: 1 }),
    spec: OA('/chat/completions'),
    stream: 'sse',
    extra: (events) => {
      const chunks = events.filter((e) => e.data !== '[DONE]').map((e) => e.data);
      const p = [];
      chunks.slice(0, -1).forEach((c, i) => {
        if (!('usage' in c) || c.usage !== null) p.push(`chunk ${i}: usage is ${show(c.usage)}, the spec says null on every chunk but the last`);
      });
      const last = chunks[chunks.length - 1];
      if (!last?.usage || last.choices.length !== 0) p.push(`last chunk: ${show(last)}, wanted usage and no choices`);
      return p;
    },
  });
  await check(P, 'chat: structured output (json_schema)', {
    path: '/v1/chat/completions',
    body: chatBody({
      max_tokens: 40,
      response_format: { type: 'json_schema', json_schema: { name: 'answer', strict: true, schema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'], additionalProperties: false } } },
    }),
    spec: OA('/chat/completions'),
  });
  await check(P, 'chat: json_object, streamed', {
    path: '/v1/chat/completions',
    body: chatBody({ max_tokens: 16, stream: true, response_format: { type: 'json_object' } }),
    spec: OA('/chat/completions'),
    stream: 'sse',
  });
  const tchat = (extra) => ({ model: TOOLS, messages: [{ role: 'user', content: 'Weather in Paris and the time in Rome?' }], max_tokens: 64, tools: [weather, timeTool], ...extra });
  await check(P, 'chat: tools, tool_choice required', { path: '/v1/chat/completions', body: tchat({ tool_choice: 'required' }), spec: OA('/chat/completions') });
  await check(P, 'chat: tools, streamed', { path: '/v1/chat/completions', body: tchat({ tool_choice: 'required', stream: true }), spec: OA('/chat/completions'), stream: 'sse' });
  await check(P, 'chat: parallel_tool_calls false, named tool_choice: one call', {
    path: '/v1/chat/completions',
    body: tchat({ tool_choice: { type: 'function', function: { name: 'get_weather' } }, parallel_tool_calls: false, max_tokens: 96 }),
    spec: OA('/chat/completions'),
    extra: (b) => need((b.choices[0].message.tool_calls || []).length <= 1, `${b.choices[0].message.tool_calls?.length} tool calls`),
  });
  await check(P, 'chat: parallel_tool_calls false, named tool_choice, streamed: one call', {
    path: '/v1/chat/completions',
    body: tchat({ tool_choice: { type: 'function', function: { name: 'get_weather' } }, parallel_tool_calls: false, max_tokens: 96, stream: true }),
    spec: OA('/chat/completions'),
    stream: 'sse',
    extra: (events) => need(countCalls(events) <= 1, `${countCalls(events)} streamed tool calls`),
  });
  await check(P, 'chat: parallel_tool_calls false, required, streamed: one call', {
    path: '/v1/chat/completions',
    body: tchat({ tool_choice: 'required', parallel_tool_calls: false, max_tokens: 96, stream: true }),
    spec: OA('/chat/completions'),
    stream: 'sse',
    extra: (events) => need(countCalls(events) <= 1, `${countCalls(events)} streamed tool calls`),
  });
  await check(P, 'chat: multi-turn with a tool result', {
    path: '/v1/chat/completions',
    body: {
      model: TOOLS,
      max_tokens: 16,
      tools: [weather],
      messages: [
        { role: 'user', content: 'Weather in Paris?' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
        { role: 'tool', tool_call_id: 'call_1', content: 'Sunny' },
      ],
    },
    spec: OA('/chat/completions'),
  });
  // Stored chat completions.
  const stored = await check(P, 'chat: store true', { path: '/v1/chat/completions', body: chatBody({ store: true, metadata: { suite: 'conformance' } }), spec: OA('/chat/completions') });
  const sid = stored?.id ?? 'missing';
  await check(P, 'GET /v1/chat/completions (stored list)', {
    method: 'GET',
    path: '/v1/chat/completions',
    spec: OA('/chat/completions', 'get'),
    extra: (b) => need(b.data.some((c) => c.id === sid), `${sid} not listed`),
  });
  const second = await check(P, 'chat: store true, streamed', { path: '/v1/chat/completions', body: chatBody({ store: true, stream: true }), spec: OA('/chat/completions'), stream: 'sse' });
  const sid2 = second?.find((e) => e.data !== '[DONE]')?.data.id ?? 'missing';
  await check(P, 'GET /v1/chat/completions?limit=1&order=desc (a page)', {
    method: 'GET',
    path: '/v1/chat/completions?limit=1&order=desc',
    spec: OA('/chat/completions', 'get'),
    extra: (b) => need(b.data.length === 1 && b.data[0].id === sid2 && b.has_more === true && b.first_id === sid2, `page ${show(b)}`),
  });
  await check(P, 'GET /v1/chat/completions/{id}', { method: 'GET', path: `/v1/chat/completions/${sid}`, spec: OA('/chat/completions/{completion_id}', 'get'), extra: (b) => need(b.id === sid, `id ${b.id}`) });
  await check(P, 'GET /v1/chat/completions/{id}/messages', {
    method: 'GET',
    path: `/v1/chat/completions/${sid}/messages`,
    spec: OA('/chat/completions/{completion_id}/messages', 'get'),
    bodyAs: 'x-gantry-ChatCompletionMessageList',
    extra: (b) => need(b.data.length === 1 && b.data[0].content === 'Say hello.', `messages ${show(b.data)}`),
  });
  await check(P, 'GET /v1/chat/completions/{id} unknown: 404', { method: 'GET', path: '/v1/chat/completions/chatcmpl-none', status: 404, spec: OA('/chat/completions/{completion_id}', 'get') });
  await check(P, 'DELETE /v1/chat/completions/{id}', { method: 'DELETE', path: `/v1/chat/completions/${sid}`, spec: OA('/chat/completions/{completion_id}', 'delete'), extra: (b) => need(b.deleted === true, 'not deleted') });
  // Completions.
  const cbody = (extra) => ({ model: CHAT, prompt: 'Once upon a time', max_tokens: 6, ...extra });
  await check(P, 'completions: plain', { path: '/v1/completions', body: cbody(), spec: OA('/completions') });
  await check(P, 'completions: logprobs, echo false, n=2', { path: '/v1/completions', body: cbody({ logprobs: 2, n: 2 }), spec: OA('/completions') });
  await check(P, 'completions: streamed with usage', { path: '/v1/completions', body: cbody({ stream: true, stream_options: { include_usage: true } }), spec: OA('/completions'), stream: 'sse', eventsAs: 'x-gantry-CompletionStreamChunk' });
  // Several prompts in one request are refused (each is its own generation here; the message says to
  // send one request per prompt), in OpenAI's error shape.
  await check(P, 'completions: several prompts: 400 saying so', {
    path: '/v1/completions',
    body: cbody({ prompt: ['Once upon a time', 'The end'] }),
    status: 400,
    spec: OA('/completions'),
    extra: (b) => need(/several prompts/.test(b.error.message) && b.error.param === 'prompt', `error ${show(b.error)}`),
  });
  await check(P, 'completions: a token array', { path: '/v1/completions', body: cbody({ prompt: [1, 450, 1095] }), spec: OA('/completions') });
  await check(P, 'completions: one token array in an array, streamed', {
    path: '/v1/completions',
    body: cbody({ prompt: [[1, 450, 1095]], stream: true }),
    spec: OA('/completions'),
    stream: 'sse',
    eventsAs: 'x-gantry-CompletionStreamChunk',
  });
  await check(P, 'completions: several token arrays: 400 saying so', {
    path: '/v1/completions',
    body: cbody({ prompt: [[1, 450], [1, 1095]] }),
    status: 400,
    spec: OA('/completions'),
    extra: (b) => need(/several prompts/.test(b.error.message), `error ${show(b.error)}`),
  });
  // Embeddings.
  await check(P, 'embeddings: a string', { path: '/v1/embeddings', body: { model: CHAT, input: 'hello' }, spec: OA('/embeddings') });
  await check(P, 'embeddings: strings, base64', {
    path: '/v1/embeddings',
    body: { model: CHAT, input: ['a', 'b'], encoding_format: 'base64' },
    spec: OA('/embeddings'),
    // The spec types `embedding` as the float list only; with encoding_format base64 it is those floats'
    // little-endian bytes in base64 (its own description of encoding_format; the official SDK decodes so).
    decode: (b) => {
      for (const d of b.data) {
        if (typeof d.embedding !== 'string') continue;
        const bytes = Buffer.from(d.embedding, 'base64');
        d.embedding = bytes.length % 4 ? 'base64 of a length not a multiple of 4' : Array.from(new Float32Array(new Uint8Array(bytes).buffer));
      }
      return b;
    },
  });
  // Token ids are refused: the embedding models here take text (the message says so).
  await check(P, 'embeddings: a token array: 400 saying so', {
    path: '/v1/embeddings',
    body: { model: CHAT, input: [1, 450, 1095] },
    status: 400,
    spec: OA('/embeddings'),
    extra: (b) => need(/token/.test(b.error.message) && b.error.param === 'input', `error ${show(b.error)}`),
  });
  await check(P, 'embeddings: token arrays: 400 saying so', { path: '/v1/embeddings', body: { model: CHAT, input: [[1, 450], [1, 1095, 7]] }, status: 400, spec: OA('/embeddings') });
  // Errors, every class.
  await check(P, 'error: no API key: 401', { path: '/v1/chat/completions', body: chatBody(), headers: { authorization: '' }, status: 401, spec: OA('/chat/completions') });
  await check(P, 'error: malformed JSON: 400', { path: '/v1/chat/completions', body: '{"model":', status: 400, spec: OA('/chat/completions') });
  await check(P, 'error: missing messages: 400', { path: '/v1/chat/completions', body: { model: CHAT }, status: 400, spec: OA('/chat/completions') });
  await check(P, 'error: bad temperature: 400', { path: '/v1/chat/completions', body: chatBody({ temperature: 'hot' }), status: 400, spec: OA('/chat/completions') });
  await check(P, 'error: unknown model: 404', { path: '/v1/chat/completions', body: chatBody({ model: 'no-such-model' }), status: 404, spec: OA('/chat/completions') });
  await check(P, 'error: context length exceeded: 400', {
    path: '/v1/completions',
    body: cbody({ prompt: 'word '.repeat(3000) }),
    status: 400,
    spec: OA('/completions'),
  });
  await check(P, 'error: tool_choice names an undeclared function: 400', {
    path: '/v1/chat/completions',
    body: tchat({ tool_choice: { type: 'function', function: { name: 'nope' } } }),
    status: 400,
    spec: OA('/chat/completions'),
  });
  await check(P, 'error: wrong method: 405', { method: 'GET', path: '/v1/embeddings', status: 405, spec: OA('/embeddings') });
  await check(P, 'error: embeddings of a reranker: 400', { path: '/v1/embeddings', body: { model: RERANK, input: 'x' }, status: 400, spec: OA('/embeddings') });
}

// ---- OpenAI Responses
const RS = (path, m = 'post') => ['openai', path, m, 'ErrorResponse'];
async function responses() {
  const P = 'responses';
  const rbody = (extra) => ({ model: CHAT, input: 'Say hello.', max_output_tokens: 8, ...extra });
  const first = await check(P, 'plain, stored', { path: '/v1/responses', body: rbody({ instructions: 'Be brief.' }), spec: RS('/responses') });
  const rid = first?.id ?? 'missing';
  await check(P, 'streamed', {
    path: '/v1/responses',
    body: rbody({ stream: true }),
    spec: RS('/responses'),
    stream: 'sse',
    extra: (events) => events.filter((e) => e.event !== e.data.type).map((e) => `event name ${e.event} but type ${e.data.type}`),
  });
  await check(P, 'multi-turn: previous_response_id', { path: '/v1/responses', body: rbody({ previous_response_id: rid, input: 'Again.' }), spec: RS('/responses') });
  await check(P, 'multi-turn: input items', {
    path: '/v1/responses',
    body: rbody({
      input: [
        { role: 'user', content: 'Hi' },
        { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Hello.', annotations: [] }] },
        { role: 'user', content: [{ type: 'input_text', text: 'Again.' }] },
      ],
    }),
    spec: RS('/responses'),
  });
  await check(P, 'structured output (text.format json_schema)', {
    path: '/v1/responses',
    body: rbody({ max_output_tokens: 40, text: { format: { type: 'json_schema', name: 'answer', strict: true, schema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'], additionalProperties: false } } } }),
    spec: RS('/responses'),
  });
  const rtools = (extra) => ({
    model: TOOLS,
    input: 'Weather in Paris?',
    max_output_tokens: 64,
    tools: [{ type: 'function', name: 'get_weather', description: 'The weather', parameters: weather.function.parameters, strict: false }],
    tool_choice: 'required',
    ...extra,
  });
  await check(P, 'tools: a function call', { path: '/v1/responses', body: rtools(), spec: RS('/responses') });
  await check(P, 'tools: streamed', {
    path: '/v1/responses',
    body: rtools({ stream: true }),
    spec: RS('/responses'),
    stream: 'sse',
    extra: (events) => need(events.some((e) => e.data.type === 'response.function_call_arguments.done'), 'no response.function_call_arguments.done'),
  });
  await check(P, 'tools: multi-turn with a function_call_output', {
    path: '/v1/responses',
    body: rtools({
      tool_choice: 'auto',
      max_output_tokens: 8,
      input: [
        { role: 'user', content: 'Weather in Paris?' },
        { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' },
        { type: 'function_call_output', call_id: 'call_1', output: 'Sunny' },
      ],
    }),
    spec: RS('/responses'),
  });
  await check(P, 'GET /v1/responses/{id}', { method: 'GET', path: `/v1/responses/${rid}`, spec: RS('/responses/{response_id}', 'get') });
  await check(P, 'GET /v1/responses/{id}/input_items', {
    method: 'GET',
    path: `/v1/responses/${rid}/input_items`,
    spec: RS('/responses/{response_id}/input_items', 'get'),
    extra: (b) => need(b.data.length >= 1, 'no input items'),
  });
  await check(P, 'POST /v1/responses/input_tokens', {
    path: '/v1/responses/input_tokens',
    body: { model: CHAT, input: 'Count me.' },
    spec: RS('/responses/input_tokens'),
    extra: (b) => need(b.input_tokens > 0, `input_tokens ${b.input_tokens}`),
  });
  await check(P, 'POST /v1/responses/{id}/cancel (not a background response): 400', {
    path: `/v1/responses/${rid}/cancel`,
    status: 400,
    spec: RS('/responses/{response_id}/cancel'),
  });
  await check(P, 'POST /v1/responses/compact', { path: '/v1/responses/compact', body: { model: CHAT, input: 'Hello there.' }, status: 400, spec: RS('/responses/compact') });
  await check(P, 'DELETE /v1/responses/{id}', { method: 'DELETE', path: `/v1/responses/${rid}`, spec: RS('/responses/{response_id}', 'delete') });
  await check(P, 'GET /v1/responses/{id} unknown: 404', { method: 'GET', path: '/v1/responses/resp_none', status: 404, spec: RS('/responses/{response_id}', 'get') });
  await check(P, 'error: unknown sub-path: 404', { path: `/v1/responses/${rid}/nothing`, body: {}, status: 404, spec: RS('/responses/{response_id}', 'get') });
  await check(P, 'error: missing input: 400', { path: '/v1/responses', body: { model: CHAT }, status: 400, spec: RS('/responses') });
  await check(P, 'error: unknown model: 404', { path: '/v1/responses', body: rbody({ model: 'no-such-model' }), status: 404, spec: RS('/responses') });
  await check(P, 'error: unknown previous_response_id: 404', { path: '/v1/responses', body: rbody({ previous_response_id: 'resp_none' }), status: 404, spec: RS('/responses') });
  await check(P, 'error: no API key: 401', { path: '/v1/responses', body: rbody(), headers: { authorization: '' }, status: 401, spec: RS('/responses') });
}

// ---- Anthropic Messages
const AH = { 'anthropic-version': '2023-06-01' };
const AN = (path, m = 'post') => ['anthropic', path, m, 'ErrorResponse'];
async function anthropic() {
  const P = 'anthropic';
  const mbody = (extra) => ({ model: CHAT, max_tokens: 8, messages: hi, ...extra });
  const msg = (name, body, extra = {}) => check(P, name, { path: '/v1/messages', body, headers: AH, spec: AN('/v1/messages'), ...extra });
  await msg('plain', mbody());
  await msg('system + multi-turn', mbody({ system: [{ type: 'text', text: 'Be brief.' }], messages: [...hi, { role: 'assistant', content: 'Hello.' }, { role: 'user', content: [{ type: 'text', text: 'Again.' }] }] }));
  await msg('streamed', mbody({ stream: true }), { stream: 'sse', extra: (ev) => ev.filter((e) => e.event !== e.data.type).map((e) => `event name ${e.event} but type ${e.data.type}`) });
  await msg('stop_sequences, temperature, top_k', mbody({ stop_sequences: ['\n'], temperature: 0.5, top_k: 20 }));
  const tools = [{ name: 'get_weather', description: 'The weather', input_schema: weather.function.parameters }];
  const tbody = (extra) => ({ model: TOOLS, max_tokens: 64, messages: [{ role: 'user', content: 'Weather in Paris?' }], tools, tool_choice: { type: 'any' }, ...extra });
  await msg('tools: tool_use', tbody());
  await msg('tools: streamed', tbody({ stream: true }), { stream: 'sse' });
  await msg('tools: named, disable_parallel_tool_use', tbody({ tool_choice: { type: 'tool', name: 'get_weather', disable_parallel_tool_use: true } }), {
    extra: (b) => need(b.content.filter((c) => c.type === 'tool_use').length <= 1, 'more than one tool_use'),
  });
  await msg('tools: a tool_result continues', {
    model: TOOLS,
    max_tokens: 8,
    tools,
    messages: [
      { role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'Sunny' }] },
    ],
  });
  await check(P, 'count_tokens', { path: '/v1/messages/count_tokens', body: { model: CHAT, messages: hi }, headers: AH, spec: AN('/v1/messages/count_tokens') });
  await check(P, 'GET /v1/models (anthropic-version)', { method: 'GET', path: '/v1/models', headers: AH, spec: AN('/v1/models', 'get') });
  await check(P, 'GET /v1/models/{id} (anthropic-version)', { method: 'GET', path: `/v1/models/${CHAT}`, headers: AH, spec: AN('/v1/models/{model_id}', 'get') });
  await check(P, 'GET /v1/models/{id} unknown (anthropic-version): 404', { method: 'GET', path: '/v1/models/no-such-model', headers: AH, status: 404, spec: AN('/v1/models/{model_id}', 'get') });
  await check(P, 'POST /v1/messages/batches: not supported', {
    path: '/v1/messages/batches',
    body: { requests: [{ custom_id: 'a', params: mbody() }] },
    headers: AH,
    status: 400,
    spec: AN('/v1/messages/batches'),
  });
  await check(P, 'error: unknown path under /v1/messages: 404', { path: '/v1/messages/nothing', body: {}, headers: AH, status: 404, spec: AN('/v1/messages') });
  await check(P, 'error: missing max_tokens: 400', { path: '/v1/messages', body: { model: CHAT, messages: hi }, headers: AH, status: 400, spec: AN('/v1/messages') });
  await check(P, 'error: malformed JSON: 400', { path: '/v1/messages', body: '{', headers: AH, status: 400, spec: AN('/v1/messages') });
  await check(P, 'error: unknown model: 404', { path: '/v1/messages', body: mbody({ model: 'no-such-model' }), headers: AH, status: 404, spec: AN('/v1/messages') });
  await check(P, 'error: no API key: 401', { path: '/v1/messages', body: mbody(), headers: { ...AH, authorization: '' }, status: 401, spec: AN('/v1/messages') });
}

// ---- KServe v2 REST (Open Inference Protocol)
const MV = '/v2/models/${MODEL_NAME}/versions/${MODEL_VERSION}';
const KS = (path, m = 'get', err = 'inference_error_response') => ['oip', path, m, err];
async function kserve() {
  const P = 'kserve';
  const input = (extra = {}) => ({ inputs: [{ name: 'input', shape: [1, 64], datatype: 'FP32', data: Array(64).fill(0.1), ...extra }] });
  await check(P, 'GET /v2', { method: 'GET', path: '/v2', spec: KS('/v2/') });
  await check(P, 'GET /v2/health/live', { method: 'GET', path: '/v2/health/live', spec: KS('/v2/health/live') });
  await check(P, 'GET /v2/health/ready', { method: 'GET', path: '/v2/health/ready', spec: KS('/v2/health/ready') });
  await check(P, 'GET /v2/models/{m}', { method: 'GET', path: `/v2/models/${TENSOR}`, spec: KS(MV) });
  await check(P, 'GET /v2/models/{m}/versions/1', { method: 'GET', path: `/v2/models/${TENSOR}/versions/1`, spec: KS(MV) });
  await check(P, 'GET /v2/models/{m}/ready', { method: 'GET', path: `/v2/models/${TENSOR}/ready`, spec: KS(`${MV}/ready`) });
  await check(P, 'GET /v2/models/{m} of a llama.cpp model', { method: 'GET', path: `/v2/models/${CHAT}`, spec: KS(MV) });
  await check(P, 'infer', { path: `/v2/models/${TENSOR}/infer`, body: input(), spec: KS(`${MV}/infer`, 'post') });
  await check(P, 'infer: id, named output, binary_data false', {
    path: `/v2/models/${TENSOR}/infer`,
    body: { id: 'req-1', ...input(), outputs: [{ name: 'logits', parameters: { binary_data: false } }] },
    spec: KS(`${MV}/infer`, 'post'),
    extra: (b) => need(b.id === 'req-1', `id ${b.id}`),
  });
  await check(P, 'infer: nested data', {
    path: `/v2/models/${TENSOR}/infer`,
    body: input({ data: [Array(64).fill(0.2)] }),
    spec: KS(`${MV}/infer`, 'post'),
  });
  await check(P, 'error: infer with a wrong shape: 400', { path: `/v2/models/${TENSOR}/infer`, body: input({ shape: [1, 63] }), status: 400, spec: KS(`${MV}/infer`, 'post') });
  await check(P, 'error: infer malformed JSON: 400', { path: `/v2/models/${TENSOR}/infer`, body: '{"inputs":', status: 400, spec: KS(`${MV}/infer`, 'post') });
  await check(P, 'error: infer unknown model: 404', { path: '/v2/models/no-such-model/infer', body: input(), status: 404, spec: KS(`${MV}/infer`, 'post') });
  await check(P, 'error: metadata of an unknown model: 404', { method: 'GET', path: '/v2/models/no-such-model', status: 404, spec: KS(MV, 'get', 'metadata_model_error_response') });
  await check(P, 'error: infer without an API key: 401', { path: `/v2/models/${TENSOR}/infer`, body: input(), headers: { authorization: '' }, status: 401, spec: KS(`${MV}/infer`, 'post') });
}

// ---- Ollama
const OL = (path, m = 'post') => ['ollama', path, m, 'ErrorResponse'];
async function ollama() {
  const P = 'ollama';
  const gen = (extra) => ({ model: CHAT, prompt: 'Once upon a time', options: { num_predict: 6 }, ...extra });
  const chat = (extra) => ({ model: CHAT, messages: hi, options: { num_predict: 6 }, ...extra });
  await check(P, 'GET /api/version', { method: 'GET', path: '/api/version', spec: OL('/api/version', 'get') });
  await check(P, 'GET /api/tags', { method: 'GET', path: '/api/tags', spec: OL('/api/tags', 'get') });
  await check(P, 'GET /api/ps', { method: 'GET', path: '/api/ps', spec: OL('/api/ps', 'get') });
  await check(P, 'POST /api/show', { path: '/api/show', body: { model: CHAT }, spec: OL('/api/show') });
  await check(P, 'generate: plain', { path: '/api/generate', body: gen({ stream: false }), spec: OL('/api/generate') });
  await check(P, 'generate: streamed (NDJSON)', { path: '/api/generate', body: gen(), spec: OL('/api/generate'), stream: 'ndjson' });
  await check(P, 'generate: format json', { path: '/api/generate', body: gen({ stream: false, format: 'json' }), spec: OL('/api/generate') });
  await check(P, 'generate: raw, system, seed', { path: '/api/generate', body: gen({ stream: false, raw: true, options: { num_predict: 4, seed: 3 } }), spec: OL('/api/generate') });
  await check(P, 'chat: plain', { path: '/api/chat', body: chat({ stream: false }), spec: OL('/api/chat') });
  await check(P, 'chat: streamed (NDJSON)', { path: '/api/chat', body: chat(), spec: OL('/api/chat'), stream: 'ndjson' });
  await check(P, 'chat: multi-turn', {
    path: '/api/chat',
    body: chat({ stream: false, messages: [{ role: 'system', content: 'Be brief.' }, ...hi, { role: 'assistant', content: 'Hello.' }, { role: 'user', content: 'Again.' }] }),
    spec: OL('/api/chat'),
  });
  await check(P, 'chat: structured output (format schema)', {
    path: '/api/chat',
    body: chat({ stream: false, options: { num_predict: 40 }, format: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] } }),
    spec: OL('/api/chat'),
  });
  const tools = [weather];
  await check(P, 'chat: tools', { path: '/api/chat', body: { model: TOOLS, stream: false, messages: [{ role: 'user', content: 'Weather in Paris?' }], tools, options: { num_predict: 64 } }, spec: OL('/api/chat') });
  await check(P, 'chat: tools, streamed', { path: '/api/chat', body: { model: TOOLS, messages: [{ role: 'user', content: 'Weather in Paris?' }], tools, options: { num_predict: 64 } }, spec: OL('/api/chat'), stream: 'ndjson' });
  await check(P, 'chat: a tool result continues', {
    path: '/api/chat',
    body: {
      model: TOOLS,
      stream: false,
      tools,
      options: { num_predict: 8 },
      messages: [
        { role: 'user', content: 'Weather in Paris?' },
        { role: 'assistant', content: '', tool_calls: [{ function: { name: 'get_weather', arguments: { city: 'Paris' } } }] },
        { role: 'tool', content: 'Sunny', tool_name: 'get_weather' },
      ],
    },
    spec: OL('/api/chat'),
  });
  await check(P, 'embed: a string', { path: '/api/embed', body: { model: CHAT, input: 'hello' }, spec: OL('/api/embed') });
  await check(P, 'embed: strings', { path: '/api/embed', body: { model: CHAT, input: ['a', 'b'] }, spec: OL('/api/embed') });
  await check(P, 'error: generate unknown model: 404', { path: '/api/generate', body: gen({ model: 'no-such-model' }), status: 404, spec: OL('/api/generate') });
  await check(P, 'error: chat malformed JSON: 400', { path: '/api/chat', body: '{"model"', status: 400, spec: OL('/api/chat') });
  await check(P, 'error: chat missing model: 400', { path: '/api/chat', body: { messages: hi }, status: 400, spec: OL('/api/chat') });
  await check(P, 'error: show unknown model: 404', { path: '/api/show', body: { model: 'no-such-model' }, status: 404, spec: OL('/api/show') });
  await check(P, 'error: embed a reranker: 400', { path: '/api/embed', body: { model: RERANK, input: 'x' }, status: 400, spec: OL('/api/embed') });
  await check(P, 'error: no API key: 401', { path: '/api/chat', body: chat({ stream: false }), headers: { authorization: '' }, status: 401, spec: OL('/api/chat') });
}

// ---- Rerank (Cohere's /v1/rerank)
const CO = (path) => ['cohere', path, 'post', null];
async function rerank() {
  const P = 'rerank';
  const docs = ['Paris is the capital of France.', 'Bananas are yellow.', 'France is in Europe.'];
  await check(P, 'rerank', { path: '/v1/rerank', body: { model: RERANK, query: 'capital of France', documents: docs }, spec: CO('/v1/rerank') });
  await check(P, 'rerank: top_n, return_documents', {
    path: '/v1/rerank',
    body: { model: RERANK, query: 'capital of France', documents: docs, top_n: 2, return_documents: true },
    spec: CO('/v1/rerank'),
    extra: (b) => need(b.results.length === 2, `${b.results.length} results`),
  });
  await check(P, 'rerank: /rerank', { path: '/rerank', body: { model: RERANK, query: 'capital', documents: docs }, spec: CO('/v1/rerank') });
  await check(P, 'error: missing query: 400', { path: '/v1/rerank', body: { model: RERANK, documents: docs }, status: 400, spec: CO('/v1/rerank') });
  await check(P, 'error: not a reranker: 400', { path: '/v1/rerank', body: { model: CHAT, query: 'q', documents: docs }, status: 400, spec: CO('/v1/rerank') });
  await check(P, 'error: unknown model: 404', { path: '/v1/rerank', body: { model: 'no-such-model', query: 'q', documents: docs }, status: 404, spec: CO('/v1/rerank') });
  await check(P, 'error: no API key: 401', { path: '/v1/rerank', body: { model: RERANK, query: 'q', documents: docs }, headers: { authorization: '' }, status: 401, spec: CO('/v1/rerank') });
}

for (const [name, { dropped }] of Object.entries(DOCS)) if (dropped) console.log(`note: ${name}: ${dropped} discriminator(s) ajv cannot read were left to their oneOf/anyOf`);
await openai();
await responses();
await anthropic();
await kserve();
await ollama();
await rerank();
let all = 0;
let passed = 0;
for (const [p, t] of Object.entries(results)) {
  console.log(`conformance: ${p} ${t.passed}/${t.total}`);
  all += t.total;
  passed += t.passed;
}
console.log(`conformance: all ${passed}/${all}`);
if (failures.length || all === 0) process.exit(1);
