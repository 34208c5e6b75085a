#!/usr/bin/env node
// One serving-benchmark run against one OpenAI-compatible server, with the field's method (vLLM's `vllm bench
// serve`): Poisson arrivals at a fixed seed, TTFT / TPOT / ITL / E2EL percentiles, goodput at a stated SLO.
// bench/serve_goodput.sh runs it against `gantry serve` and llama-server alike. Node >= 20, no packages.
//
//   node bench/serve_goodput.mjs --url U --model M --phase alone|flood|deadline [--keys FILE] [options]
//
// The load (every figure an option; the same seed gives the same arrivals and prompts on every server):
// - interactive tenants (--tenants 3, named chat-1..chat-N): each sends Poisson arrivals at --rate requests/s
//   for --duration seconds; prompts of --prompt-words words, --max-tokens tokens each.
// - phase flood and deadline add one flooding tenant (`bulk`): --flood-clients loops, each sending prompts of
//   --flood-words words (--flood-max-tokens tokens) back to back until --duration has passed. A 429 makes that
//   loop wait its Retry-After (as the openai client does) and send again.
// - phase deadline: every interactive request carries `x-request-deadline-ms`, drawn per request between
//   --deadline-min-ms and --deadline-max-ms. A request refused at admission for its deadline is sent again at
//   once without one (the shadow): whether the shadow finished within the deadline says whether the refusal
//   was needed. An admitted request that ran past its deadline and was stopped, or finished late, counts how
//   far past it ended.
// --keys: a JSON object {tenant: key}; each request then carries `Authorization: Bearer <its tenant's key>`
// (a server without keys, as llama-server here, ignores it).
//
// Every request: temperature 0, seed 42, streamed with usage, ignore_eos so it generates exactly its
// max_tokens (checked against usage; a token ending inside a UTF-8 character may stream with the next
// one). A request meets the SLO when its TTFT <= --slo-ttft-ms and its TPOT (time per output token after
// the first) <= --slo-tpot-ms; goodput is such requests per second of the run. A refusal (429) is not a
// failure; any other failed request fails the run.
//
// Prints one JSON object: vLLM's result keys (duration, completed, request_throughput, request_goodput,
// output_throughput, mean/median/std/p50/p90/p99 of ttft/tpot/itl/e2el in ms, ...), then `tenants` (the same
// figures per kind: interactive, flood), `refused`, and for phase deadline `deadline`. Exit 1 with "error"
// when the run failed, 2 on bad arguments.
import fs from "node:fs";
import { RequestFailed, chat, parseOptions, percentile, rng, round2, words } from "./lib/chat_stream.mjs";

function parseArgs(argv) {
  const a = parseOptions(argv, {
    url: null, model: null, phase: null, keys: null, seed: 7, duration: 30, tenants: 3, rate: 0.3,
    "prompt-words": 40, "max-tokens": 16, "flood-clients": 4, "flood-words": 600, "flood-max-tokens": 32,
    "slo-ttft-ms": 2000, "slo-tpot-ms": 250, "deadline-min-ms": 300, "deadline-max-ms": 4000, timeout: 300,
    "run-timeout": 900,
  }, usage);
  if (!a.url || !a.model) usage("--url and --model are required");
  if (!["alone", "flood", "deadline"].includes(a.phase)) usage("--phase must be alone, flood or deadline");
  for (const k of ["tenants", "max-tokens", "flood-clients", "flood-max-tokens"]) {
    if (!Number.isInteger(a[k]) || a[k] < 1) usage(`--${k} must be an integer >= 1`);
  }
  if (!(a.rate > 0) || !(a.duration > 0)) usage("--rate and --duration must be > 0");
  if (a["max-tokens"] < 2 || a["flood-max-tokens"] < 2) usage("max tokens must be >= 2 (TPOT needs two tokens)");
  a.keys = a.keys ? JSON.parse(fs.readFileSync(a.keys, "utf8")) : {};
  return a;
}

function usage(msg) {
  process.stderr.write(`serve_goodput.mjs: ${msg}\n`);
  process.exit(2);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// One request's record: what the figures are computed from.
function record(kind, tenant, r, maxTokens) {
  const tpot = (r.e2e_ms - r.ttft_ms) / (maxTokens - 1);  // usage said maxTokens (chat() checks)
  const itls = r.times.slice(1).map((t, k) => t - r.times[k]);
  return { kind, tenant, ttft_ms: r.ttft_ms, tpot_ms: tpot, e2el_ms: r.e2e_ms, itls, input_len: r.prompt_tokens ?? 0,
    output_len: r.completion_tokens };
}

// vLLM's statistics of one metric: mean_, median_, std_, p50_, p90_, p99_<name>_ms.
function stats(out, name, values) {
  const n = values.length;
  const mean = n ? values.reduce((s, x) => s + x, 0) / n : null;
  const std = n ? Math.sqrt(values.reduce((s, x) => s + (x - mean) ** 2, 0) / n) : null;
  out[`mean_${name}_ms`] = round2(mean);
  out[`median_${name}_ms`] = round2(percentile(values, 50));
  out[`std_${name}_ms`] = round2(std);
  for (const p of [50, 90, 99]) out[`p${p}_${name}_ms`] = round2(percentile(values, p));
}

function summary(records, seconds, a) {
  const good = records.filter((r) => r.ttft_ms <= a["slo-ttft-ms"] && r.tpot_ms <= a["slo-tpot-ms"]);
  const input = records.reduce((s, r) => s + r.input_len, 0), output = records.reduce((s, r) => s + r.output_len, 0);
  const out = {
    completed: records.length, total_input_tokens: input, total_output_tokens: output,
    request_throughput: round2(records.length / seconds), request_goodput: round2(good.length / seconds),
    output_throughput: round2(output / seconds), total_token_throughput: round2((input + output) / seconds),
    slo_met: good.length,
  };
  stats(out, "ttft", records.map((r) => r.ttft_ms));
  stats(out, "tpot", records.map((r) => r.tpot_ms));
  stats(out, "itl", records.flatMap((r) => r.itls));
  stats(out, "e2el", records.map((r) => r.e2el_ms));
  return out;
}

// The interactive arrivals: per tenant, exponential gaps at `rate` from a generator seeded by (seed, tenant).
function arrivals(a) {
  const list = [];
  for (let t = 1; t <= a.tenants; ++t) {
    const r = rng(`${a.seed}-chat-${t}`);
    for (let at = -Math.log(1 - r()) / a.rate; at < a.duration; at += -Math.log(1 - r()) / a.rate) {
      const deadline = Math.round(a["deadline-min-ms"] + r() * (a["deadline-max-ms"] - a["deadline-min-ms"]));
      list.push({ tenant: `chat-${t}`, at_ms: at * 1000, id: `${a.seed}-chat-${t}-${list.length}`, deadline });
    }
  }
  return list.sort((x, y) => x.at_ms - y.at_ms);
}

const auth = (a, tenant) => (a.keys[tenant] ? { Authorization: `Bearer ${a.keys[tenant]}` } : {});

async function run(a) {
  const records = [], refused = { interactive: 0, flood: 0 }, deadline = { admitted: 0, met: 0, late: [],
    refused: 0, refused_would_meet: 0, shadows: [] };
  const t0 = performance.now();
  const send = (tenant, id, nwords, maxTokens, extra = {}) => chat(a, {
    messages: [{ role: "user", content: `Request ${id}: ${words(id, nwords)}` }], maxTokens, cachePrompt: true,
    timeoutS: a.timeout, headers: { ...auth(a, tenant), ...extra }, exactDeltas: false,
  });

  const interactive = async (q) => {
    await sleep(Math.max(0, q.at_ms - (performance.now() - t0)));
    const withDeadline = a.phase === "deadline";
    const sent = performance.now();
    try {
      const r = await send(q.tenant, q.id, a["prompt-words"], a["max-tokens"],
        withDeadline ? { "x-request-deadline-ms": String(q.deadline) } : {});
      records.push(record("interactive", q.tenant, r, a["max-tokens"]));
      if (withDeadline) {
        ++deadline.admitted;
        if (r.e2e_ms <= q.deadline) ++deadline.met; else deadline.late.push(r.e2e_ms - q.deadline);
      }
    } catch (e) {
      if (!(e instanceof RequestFailed)) throw e;
      const refusedForDeadline = withDeadline && e.status === 429 && /deadline/.test(e.message);
      // Stopped by the server once admitted (its next token past the deadline, or the deadline's timer while
      // it waited): how late that was is measured the same way as a late finish.
      const stopped = withDeadline && (e.status === 503 || e.inStream);
      if (stopped) {
        ++deadline.admitted;
        deadline.late.push(performance.now() - sent - q.deadline);
      } else if (refusedForDeadline) {
        ++deadline.refused;
        // The shadow: the same request at once without a deadline; had it been admitted, would it have made it?
        const r = await send(q.tenant, q.id, a["prompt-words"], a["max-tokens"]);
        const took = performance.now() - sent;
        deadline.shadows.push({ deadline_ms: q.deadline, took_ms: round2(took), refusal: e.message.slice(0, 240) });
        if (took <= q.deadline) ++deadline.refused_would_meet;
      } else if (e.status === 429) {
        ++refused.interactive;
      } else {
        throw e;
      }
    }
  };

  const flood = async (c) => {
    for (let i = 0; performance.now() - t0 < a.duration * 1000; ++i) {
      const id = `${a.seed}-bulk-${c}-${i}`;
      try {
        records.push(record("flood", "bulk", await send("bulk", id, a["flood-words"], a["flood-max-tokens"]),
          a["flood-max-tokens"]));
      } catch (e) {
        if (!(e instanceof RequestFailed) || e.status !== 429) throw e;
        ++refused.flood;
        const after = Number(e.headers?.["retry-after"]);
        await sleep(1000 * (Number.isFinite(after) && after > 0 ? Math.min(after, 10) : 1));
      }
    }
  };

  const plan = arrivals(a);
  const work = plan.map(interactive);
  if (a.phase !== "alone") for (let c = 0; c < a["flood-clients"]; ++c) work.push(flood(c));
  let timer;
  await Promise.race([Promise.all(work), new Promise((_, reject) => {
    timer = setTimeout(() => reject(new RequestFailed(`the run did not finish within ${a["run-timeout"]} s`)),
      a["run-timeout"] * 1000);
  })]).finally(() => clearTimeout(timer));
  const seconds = (performance.now() - t0) / 1000;

  const out = {
    date: new Date().toISOString(), backend: "openai-chat", model_id: a.model, phase: a.phase,
    num_prompts: plan.length, request_rate: round2(a.rate * a.tenants), burstiness: 1.0, duration: round2(seconds),
    slo: { ttft_ms: a["slo-ttft-ms"], tpot_ms: a["slo-tpot-ms"] }, ...summary(records, seconds, a), refused,
    tenants: {},
  };
  for (const kind of ["interactive", "flood"]) {
    const mine = records.filter((r) => r.kind === kind);
    if (mine.length) out.tenants[kind] = summary(mine, seconds, a);
  }
  if (a.phase === "deadline") {
    const steps = out.median_tpot_ms > 0 ? Math.max(0, ...deadline.late) / out.median_tpot_ms : null;
    out.deadline = { admitted: deadline.admitted, met: deadline.met, late: deadline.late.length,
      max_late_ms: round2(Math.max(0, ...deadline.late)), max_late_decode_steps: round2(steps),
      refused: deadline.refused, refused_would_meet: deadline.refused_would_meet, shadows: deadline.shadows };
  }
  return out;
}

const args = parseArgs(process.argv.slice(2));
try {
  process.stdout.write(JSON.stringify(await run(args)) + "\n");
  process.exit(0);
} catch (e) {
  process.stdout.write(JSON.stringify({ phase: args.phase, error: e instanceof RequestFailed ? e.message : String(e?.stack ?? e) }) + "\n");
  process.exit(1);
}
