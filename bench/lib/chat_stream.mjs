// What the serving benchmarks share (bench/serve_load.mjs, bench/serve_goodput.mjs): their option parser,
// deterministic prompt text, percentiles, and one streaming OpenAI chat request with its checks. Node >= 20, node:http, no packages.
import http from "node:http";

// `--name value` options over `defaults` (a copy): a boolean default makes a flag without a value, a numeric
// one takes a non-negative number. Anything else calls usage(message), which does not return.
export function parseOptions(argv, defaults, usage) {
  const a = { ...defaults };
  for (let i = 0; i < argv.length; ++i) {
    const k = argv[i].replace(/^--/, "");
    if (!(k in a) || !argv[i].startsWith("--")) usage(`unknown option '${argv[i]}'`);
    if (typeof a[k] === "boolean") { a[k] = true; continue; }
    const v = argv[++i];
    if (v === undefined) usage(`${argv[i - 1]} needs a value`);
    if (typeof a[k] === "number") {
      const n = Number(v);
      if (!Number.isFinite(n) || n < 0) usage(`${argv[i - 1]} must be a non-negative number, got '${v}'`);
      a[k] = n;
    } else {
      a[k] = v;
    }
  }
  return a;
}

// Deterministic text: mulberry32 seeded by a string hash, drawing from a fixed word list.
export const WORDS = (
  "river garden window morning silver engine market letter winter forest bridge candle harbor mountain " +
  "pencil station orange village thunder ladder rabbit kitchen planet blanket shadow marble whisper " +
  "lantern meadow copper island journey basket violet dragon feather crystal button autumn tunnel " +
  "pepper mirror castle wagon anchor saddle velvet meteor puzzle compass walnut glacier falcon " +
  "cabinet lemon harvest pebble ribbon cotton canyon beacon orchard parcel ticket signal tower " +
  "quiet bright heavy gentle rapid hollow golden narrow distant ancient simple curious brave clever " +
  "runs finds builds carries opens paints follows watches gathers repairs counts sings writes reads"
).split(" ");

export function rng(seedText) {
  let h = 2166136261;
  for (const ch of seedText) h = Math.imul(h ^ ch.charCodeAt(0), 16777619) >>> 0;
  return () => {
    h = (h + 0x6d2b79f5) >>> 0;
    let t = h;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function words(seedText, n) {
  const r = rng(seedText);
  const out = [];
  for (let i = 0; i < n; ++i) out.push(WORDS[Math.floor(r() * WORDS.length)]);
  return out.join(" ");
}

// The shared system prompt: numbered shop rules, `n` words (the one bench/serve_load.py used).
export function systemPrompt(n) {
  const topics = ["parcels", "refunds", "invoices", "delivery windows", "damaged items", "gift cards", "returns", "accounts"];
  const verbs = ["explain", "confirm", "check", "summarise", "describe", "verify", "clarify", "list"];
  const out = [];
  for (let i = 0; out.length < n; ++i) {
    out.push(...(`Rule ${i + 1}: when the customer asks about ${topics[i % 8]}, ${verbs[(i * 3) % 8]} the policy ` +
      `politely, quote reference code ${1000 + 37 * i}, and never promise a date you cannot keep.`).split(" "));
  }
  return "You are the support assistant of a mail-order shop. " + out.slice(0, n).join(" ");
}

export function percentile(values, p) {
  if (values.length === 0) return null;
  const s = [...values].sort((x, y) => x - y);
  const rank = Math.max(1, Math.min(s.length, Math.ceil((p * s.length) / 100)));
  return s[rank - 1];
}

export const round2 = (x) => (x === null ? null : Math.round(x * 100) / 100);

// A request that did not complete as it must; `status` is the HTTP status when the server answered one.
export class RequestFailed extends Error {
  constructor(message, status = null, headers = null) {
    super(message);
    this.status = status;
    this.headers = headers;
  }
}

// POSTs `payload` on a connection of its own (no keep-alive: a pooled connection the server has just
// closed would fail a request for no fault of either server); resolves to the response stream.
export function post(url, payload, signal, headers = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, {
      method: "POST", agent: false, signal,
      headers: { "Content-Type": "application/json", Accept: "text/event-stream", "Content-Length": Buffer.byteLength(payload),
        ...headers },
    }, resolve);
    req.on("error", reject);
    req.end(payload);
  });
}

// Sends one streaming chat request. opts: {messages, maxTokens, cachePrompt, timeoutS, signal, onToken,
// headers (extra request headers), exactDeltas (default true)}.
// Resolves to {ttft_ms, e2e_ms, deltas, times (performance.now() of each token), completion_tokens,
// prompt_tokens, cached_tokens}
// when the stream completes and checks out; `cancelled: true` when `signal` aborted it. Throws
// RequestFailed otherwise.
export async function chat(args, opts) {
  const body = {
    model: args.model, messages: opts.messages, max_tokens: opts.maxTokens, temperature: 0, seed: 42,
    stream: true, stream_options: { include_usage: true }, ignore_eos: true,
  };
  if (!opts.cachePrompt) body.cache_prompt = false;
  const ctl = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => { timedOut = true; ctl.abort(); }, opts.timeoutS * 1000);
  const onOuter = () => ctl.abort();
  opts.signal?.addEventListener("abort", onOuter);
  const t0 = performance.now();
  const r = { ttft_ms: null, deltas: 0, times: [], completion_tokens: null, prompt_tokens: null, cached_tokens: null };
  try {
    const res = await post(new URL("/v1/chat/completions", args.url), JSON.stringify(body), ctl.signal, opts.headers);
    if (res.statusCode !== 200) {
      let text = "";
      for await (const chunk of res) text += chunk;
      throw new RequestFailed(`HTTP ${res.statusCode}: ${text.slice(0, 300)}`, res.statusCode, res.headers);
    }
    const decoder = new TextDecoder();
    let buf = "", done = false;
    for await (const chunk of res) {
      const at = performance.now();
      buf += decoder.decode(chunk, { stream: true });
      let nl;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        if (!line.startsWith("data:")) continue;
        const data = line.slice(5).trim();
        if (data === "[DONE]") { done = true; continue; }
        let ev;
        try { ev = JSON.parse(data); } catch { throw new RequestFailed(`unparsable event: ${data.slice(0, 200)}`); }
        if (ev.error) {
          const e = new RequestFailed(`error event: ${JSON.stringify(ev.error).slice(0, 300)}`);
          e.inStream = true;  // answered 200, then stopped by the server
          e.ttft_ms = r.ttft_ms;
          throw e;
        }
        const text = ev.choices?.[0]?.delta?.content;
        if (text) {
          r.deltas += 1;
          r.times.push(at);
          if (r.ttft_ms === null) r.ttft_ms = at - t0;
          opts.onToken?.(r.deltas);
        }
        if (ev.usage) {
          r.completion_tokens = ev.usage.completion_tokens ?? null;
          r.prompt_tokens = ev.usage.prompt_tokens ?? null;
          r.cached_tokens = ev.usage.prompt_tokens_details?.cached_tokens ?? null;
        }
      }
    }
    if (!done) throw new RequestFailed("the stream ended without data: [DONE]");
    r.e2e_ms = performance.now() - t0;
    if (r.completion_tokens === null) throw new RequestFailed("the stream carried no usage");
    // exactDeltas (the default): one streamed delta per token, as both servers send for plain text. Off, only
    // usage must say max_tokens (a token that ends inside a UTF-8 character streams with the next one).
    const deltasOk = opts.exactDeltas === false || r.deltas === r.completion_tokens;
    if (!deltasOk || r.completion_tokens !== opts.maxTokens) {
      throw new RequestFailed(`streamed ${r.deltas} token deltas, usage says ${r.completion_tokens} completion ` +
        `tokens, ${opts.maxTokens} were asked for (ignore_eos)`);
    }
    return r;
  } catch (e) {
    if (opts.signal?.aborted && !timedOut) return { ...r, cancelled: true };
    if (timedOut) throw new RequestFailed(`no complete answer within ${opts.timeoutS} s`);
    if (e instanceof RequestFailed) throw e;
    throw new RequestFailed(`${e.name}: ${e.message}${e.cause ? ` (${e.cause.message ?? e.cause})` : ""}`);
  } finally {
    clearTimeout(timer);
    opts.signal?.removeEventListener("abort", onOuter);
  }
}
