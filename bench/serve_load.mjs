#!/usr/bin/env node
// Streaming load generator for the OpenAI-compatible chat endpoint of `gantry serve` and llama-server
// (bench/serve_gguf_vs_llama_server.sh drives it). Node >= 20, node:http, no packages.
//
//   node bench/serve_load.mjs load  --url U --model M [--clients 8] [--requests 4] [--max-tokens 64]
//        [--prompt-words 130] [--system-words 0] [--no-cache-prompt] [--tag T] [--timeout 180] [--run-timeout 600]
//     --clients concurrent clients each send --requests streaming chat requests one after another. Every
//     request is distinct (its user turn starts with "Request T-C-I" and continues with --prompt-words
//     words drawn from a generator seeded by that id); --system-words > 0 adds the same system prompt of
//     that many words to every request (the chat-app case a prompt cache serves). Prints one JSON object:
//     tok_per_s (streamed tokens of the whole run / its wall time), ttft_p50_ms, ttft_p99_ms, counts.
//
//   node bench/serve_load.mjs stall --url U --model M [--streams 4] [--long-prompts 3] [--long-words 2300]
//        [--tag T] [--timeout 300] [--run-timeout 600]
//     --streams streaming requests generate (up to --stream-tokens, 3000); once each has streamed 8 tokens,
//     --long-prompts requests with a --long-words-word prompt are sent one after another (each asks for 4
//     tokens). The window runs from sending the first long prompt to the end of the last one; the running
//     streams are then cancelled. Prints gap_p50_ms, gap_p99_ms, gap_max_ms (the gaps between consecutive
//     streamed tokens of the running streams that overlap the window), the window's length and the long
//     prompts' prompt_tokens.
//
// Every request: temperature 0, seed 42, stream with usage (stream_options.include_usage), ignore_eos:
// true so it generates exactly max_tokens. A token is one streamed content delta (both servers send one
// event per token); each completed request must have streamed max_tokens deltas and report the same
// completion_tokens in usage, otherwise the run fails. Any non-200, error event, missing [DONE] or usage,
// or timeout fails the run: the JSON then has "error" and the exit status is 1 (2: bad arguments).
// Bounded: each request has --timeout seconds, the run --run-timeout seconds.

import { RequestFailed, chat, parseOptions, percentile, round2, systemPrompt, words } from "./lib/chat_stream.mjs";

const MODES = new Set(["load", "stall"]);

function parseArgs(argv) {
  const mode = argv[0];
  if (!MODES.has(mode)) usage(`unknown mode '${mode ?? ""}' (load or stall)`);
  const a = parseOptions(argv.slice(1), {
    mode, url: null, model: null, clients: 8, requests: 4, "max-tokens": 64, "prompt-words": 130,
    "system-words": 0, "no-cache-prompt": false, tag: "r", timeout: 180, "run-timeout": 600,
    streams: 4, "stream-tokens": 3000, "long-prompts": 3, "long-words": 2300,
  }, usage);
  if (!a.url || !a.model) usage("--url and --model are required");
  for (const k of ["clients", "requests", "max-tokens", "streams", "stream-tokens", "long-prompts"]) {
    if (!Number.isInteger(a[k]) || a[k] < 1) usage(`--${k} must be an integer >= 1`);
  }
  return a;
}

function usage(msg) {
  process.stderr.write(`serve_load.mjs: ${msg}\n`);
  process.exit(2);
}

function withDeadline(promise, seconds, what) {
  let timer;
  const t = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new RequestFailed(`${what} did not finish within ${seconds} s`)), seconds * 1000);
  });
  return Promise.race([promise, t]).finally(() => clearTimeout(timer));
}

async function runLoad(args) {
  const system = args["system-words"] > 0 ? systemPrompt(args["system-words"]) : null;
  const results = [];
  const t0 = performance.now();
  const client = async (c) => {
    for (let i = 0; i < args.requests; ++i) {
      const id = `${args.tag}-${c}-${i}`;
      const user = `Request ${id}: ${words(id, args["prompt-words"])}`;
      const messages = (system ? [{ role: "system", content: system }] : []).concat([{ role: "user", content: user }]);
      results.push(await chat(args, { messages, maxTokens: args["max-tokens"], cachePrompt: !args["no-cache-prompt"],
        timeoutS: args.timeout }));
    }
  };
  await withDeadline(Promise.all(Array.from({ length: args.clients }, (_, c) => client(c))), args["run-timeout"], "the run");
  const wall_s = (performance.now() - t0) / 1000;
  const tokens = results.reduce((s, r) => s + r.deltas, 0);
  const ttfts = results.map((r) => r.ttft_ms);
  return {
    mode: "load", clients: args.clients, requests_per_client: args.requests, max_tokens: args["max-tokens"],
    system_words: args["system-words"], cache_prompt: !args["no-cache-prompt"], requests_ok: results.length,
    wall_s: round2(wall_s), streamed_tokens: tokens,
    usage_completion_tokens: results.reduce((s, r) => s + r.completion_tokens, 0),
    prompt_tokens: results.reduce((s, r) => s + (r.prompt_tokens ?? 0), 0),
    cached_prompt_tokens: results.reduce((s, r) => s + (r.cached_tokens ?? 0), 0),
    tok_per_s: round2(tokens / wall_s), ttft_p50_ms: round2(percentile(ttfts, 50)), ttft_p99_ms: round2(percentile(ttfts, 99)),
  };
}

async function runStall(args) {
  const stop = new AbortController();
  const warmTokens = 8;
  let started = 0, open, shut;
  // Resolves once every stream has streamed warmTokens tokens; fails when a stream ends or fails first.
  const gate = new Promise((resolve, reject) => { open = resolve; shut = reject; });
  const streams = Array.from({ length: args.streams }, (_, c) => {
    const id = `${args.tag}-stream-${c}`;
    return chat(args, {
      messages: [{ role: "user", content: `Request ${id}: ${words(id, 40)}` }], maxTokens: args["stream-tokens"],
      cachePrompt: true, timeoutS: args.timeout, signal: stop.signal,
      onToken: (n) => { if (n === warmTokens && ++started === args.streams) open(); },
    }).then((r) => {
      shut(new RequestFailed(`running stream ${c} ended (${r.deltas} tokens) before the long prompts came: raise --stream-tokens`));
      return r;
    }, (e) => {
      shut(e);
      return { failed: e };  // reported below; never an unhandled rejection
    });
  });
  const body = async () => {
    await gate;
    const w0 = performance.now();
    const long = [];
    for (let i = 0; i < args["long-prompts"]; ++i) {
      const id = `${args.tag}-long-${i}`;
      long.push(await chat(args, { messages: [{ role: "user", content: `Request ${id}: ${words(id, args["long-words"])}` }],
        maxTokens: 4, cachePrompt: true, timeoutS: args.timeout }));
    }
    const w1 = performance.now();
    stop.abort();
    return { w0, w1, long, ran: await Promise.all(streams) };
  };
  const { w0, w1, long, ran } = await withDeadline(body(), args["run-timeout"], "the run");
  const gaps = [];
  for (const [idx, r] of ran.entries()) {
    if (r.failed) throw r.failed;
    if (!r.cancelled) throw new RequestFailed(`running stream ${idx} ended before the window closed: raise --stream-tokens`);
    for (let k = 1; k < r.times.length; ++k) {
      const a = r.times[k - 1], b = r.times[k];
      if (b >= w0 && a <= w1) gaps.push(b - a);
    }
  }
  if (gaps.length < 10) throw new RequestFailed(`only ${gaps.length} token gaps fell in the window: nothing to measure`);
  return {
    mode: "stall", streams: args.streams, long_prompts: args["long-prompts"], long_words: args["long-words"],
    long_prompt_tokens: long.map((r) => r.prompt_tokens), window_s: round2((w1 - w0) / 1000), gaps: gaps.length,
    gap_p50_ms: round2(percentile(gaps, 50)), gap_p99_ms: round2(percentile(gaps, 99)), gap_max_ms: round2(Math.max(...gaps)),
    long_ttft_p50_ms: round2(percentile(long.map((r) => r.ttft_ms), 50)),
  };
}

const args = parseArgs(process.argv.slice(2));
try {
  const out = await (args.mode === "load" ? runLoad(args) : runStall(args));
  process.stdout.write(JSON.stringify(out) + "\n");
  process.exit(0);
} catch (e) {
  process.stdout.write(JSON.stringify({ mode: args.mode, error: e instanceof RequestFailed ? e.message : String(e?.stack ?? e) }) + "\n");
  process.exit(1);
}
