#!/usr/bin/env python3
"""Concurrent streaming load client for OpenAI-compatible servers (Python 3 stdlib only).

Each of --clients threads sends --requests-per-client streaming requests one after another
(stream=true, stream_options.include_usage=true, temperature 0, fixed seed) to
/v1/chat/completions (--endpoint chat) or /v1/completions (--endpoint completions), parses the
server-sent events and records:
  - time to first token (TTFT): from sending the request to the first event carrying non-empty text,
  - generated tokens: usage.completion_tokens from the final usage chunk; when the server sends no
    usage (or with --count-deltas), the number of non-empty text deltas (one delta is one token for
    llama-server and gantry),
  - the prompt tokens and of those the cached ones (usage.prompt_tokens_details.cached_tokens),
  - per-request status (HTTP status, or "timeout"/"error"/"bad_stream" when no valid answer came).
Prints one JSON object: aggregate generated tokens/s (sum of tokens of successful requests / wall
time of the whole run), TTFT p50/p99 in ms, request counts by status.

Bounded: every socket operation has --timeout seconds, every request a --timeout overall deadline,
and the run as a whole --run-timeout seconds; nothing loops without a bound.
--system-prompt adds a system message to every request and --distinct-turns makes each request's
user turn distinct (the prompt followed by "(client C, request R)"): the chat-app case a prompt
cache serves.
Exit status: 0 when every request succeeded, 1 when any failed, 2 on bad arguments.
"""

import argparse
import http.client
import json
import sys
import threading
import time
import urllib.parse


def percentile(values, p):
    """Nearest-rank percentile (p in 0..100) of a non-empty list; None for an empty one."""
    if not values:
        return None
    s = sorted(values)
    rank = max(1, min(len(s), int(-(-p * len(s) // 100))))  # ceil(p*n/100), clamped to 1..n
    return s[rank - 1]


class Result:
    __slots__ = ("status", "ttft_s", "tokens", "usage_tokens", "delta_count", "latency_s", "error",
                 "prompt_tokens", "cached_tokens")

    def __init__(self):
        self.status = None  # int HTTP status or a string for transport failures
        self.ttft_s = None
        self.tokens = 0
        self.usage_tokens = None
        self.delta_count = 0
        self.latency_s = None
        self.error = None
        self.prompt_tokens = None
        self.cached_tokens = None


def delta_text(event, endpoint):
    """The generated text carried by one streamed chunk ('' when none)."""
    choices = event.get("choices") or []
    if not choices:
        return ""
    c = choices[0]
    if endpoint == "chat":
        d = c.get("delta") or {}
        return d.get("content") or ""
    return c.get("text") or ""


def one_request(args, url, body_bytes, headers):
    r = Result()
    conn_cls = http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection
    conn = conn_cls(url.hostname, url.port, timeout=args.timeout)
    path = url.path.rstrip("/") + ("/v1/chat/completions" if args.endpoint == "chat" else "/v1/completions")
    t0 = time.monotonic()
    deadline = t0 + args.timeout
    try:
        conn.request("POST", path, body=body_bytes, headers=headers)
        resp = conn.getresponse()
        r.status = resp.status
        if resp.status != 200:
            r.error = resp.read(2000).decode("utf-8", "replace")
            return r
        saw_done = False
        # SSE: events are "data: <json>" lines separated by blank lines; other fields are ignored.
        while True:
            if time.monotonic() > deadline:
                r.status, r.error = "timeout", "request exceeded %.0f s" % args.timeout
                return r
            line = resp.readline(1 << 20)
            if not line:
                break  # server closed the stream
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                saw_done = True
                break
            try:
                event = json.loads(data)
            except ValueError:
                r.status, r.error = "bad_stream", "unparsable event: %r" % data[:200]
                return r
            if "error" in event:
                r.status, r.error = "stream_error", json.dumps(event["error"])[:500]
                return r
            text = delta_text(event, args.endpoint)
            if text:
                r.delta_count += 1
                if r.ttft_s is None:
                    r.ttft_s = time.monotonic() - t0
            usage = event.get("usage")
            if usage and usage.get("completion_tokens") is not None:
                r.usage_tokens = int(usage["completion_tokens"])
            if usage and usage.get("prompt_tokens") is not None:
                r.prompt_tokens = int(usage["prompt_tokens"])
                details = usage.get("prompt_tokens_details") or {}
                if details.get("cached_tokens") is not None:
                    r.cached_tokens = int(details["cached_tokens"])
        r.latency_s = time.monotonic() - t0
        if not saw_done:
            r.status, r.error = "bad_stream", "stream ended without data: [DONE]"
            return r
        r.tokens = r.usage_tokens if r.usage_tokens is not None and not args.count_deltas else r.delta_count
        if r.tokens == 0 or r.ttft_s is None:
            r.status, r.error = "bad_stream", "no generated text in the stream"
    except TimeoutError as e:  # socket.timeout is TimeoutError since 3.10
        r.status, r.error = "timeout", str(e)
    except (OSError, http.client.HTTPException) as e:
        r.status, r.error = "error", "%s: %s" % (type(e).__name__, e)
    finally:
        conn.close()
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", required=True, help="server base URL, e.g. http://127.0.0.1:8080")
    ap.add_argument("--model", required=True)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--requests-per-client", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--prompt", default="Write a short story about a lighthouse keeper.")
    ap.add_argument("--api-key", default=None)
    ap.add_argument("--endpoint", choices=("chat", "completions"), default="chat")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--ignore-eos", action="store_true",
                    help="send ignore_eos=true (llama-server extension) so every request generates max-tokens")
    ap.add_argument("--logit-bias", action="append", default=[], metavar="TOKEN=BIAS",
                    help="OpenAI logit_bias entries (both servers honour them): e.g. 2=-100 keeps </s> out")
    ap.add_argument("--system-prompt", default=None, help="a system message sent with every chat request")
    ap.add_argument("--distinct-turns", action="store_true",
                    help="append '(client C, request R)' to each request's prompt so no two are the same")
    ap.add_argument("--count-deltas", action="store_true",
                    help="count generated tokens from the streamed text deltas, not from usage")
    ap.add_argument("--timeout", type=float, default=120.0, help="per-request limit in seconds")
    ap.add_argument("--run-timeout", type=float, default=900.0, help="limit for the whole run in seconds")
    ap.add_argument("--json", action="store_true", help="print only the JSON object (default adds nothing else either)")
    args = ap.parse_args()
    if args.clients < 1 or args.requests_per_client < 1 or args.max_tokens < 1:
        ap.error("--clients, --requests-per-client and --max-tokens must be >= 1")

    url = urllib.parse.urlsplit(args.url)
    if url.scheme not in ("http", "https") or not url.hostname:
        ap.error("--url must be http(s)://host[:port]")

    body = {
        "model": args.model,
        "max_tokens": args.max_tokens,
        "temperature": 0,
        "seed": args.seed,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if args.ignore_eos:
        body["ignore_eos"] = True
    if args.logit_bias:
        body["logit_bias"] = {k: float(v) for k, v in (e.split("=", 1) for e in args.logit_bias)}

    def body_for(c, i):
        prompt = args.prompt + (" (client %d, request %d)" % (c, i) if args.distinct_turns else "")
        b = dict(body)
        if args.endpoint == "chat":
            b["messages"] = ([{"role": "system", "content": args.system_prompt}] if args.system_prompt else []) + [
                {"role": "user", "content": prompt}]
        else:
            b["prompt"] = (args.system_prompt + "\n\n" if args.system_prompt else "") + prompt
        return json.dumps(b).encode()

    headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    if args.api_key:
        headers["Authorization"] = "Bearer " + args.api_key

    results = []
    lock = threading.Lock()
    stop = threading.Event()

    def client(c):
        for i in range(args.requests_per_client):
            if stop.is_set():
                return
            r = one_request(args, url, body_for(c, i), headers)
            with lock:
                results.append(r)

    threads = [threading.Thread(target=client, args=(c,), daemon=True) for c in range(args.clients)]
    t_start = time.monotonic()
    for t in threads:
        t.start()
    run_deadline = t_start + args.run_timeout
    for t in threads:
        t.join(max(0.0, run_deadline - time.monotonic()))
    wall = time.monotonic() - t_start
    timed_out = any(t.is_alive() for t in threads)
    if timed_out:
        stop.set()

    with lock:
        done = list(results)
    ok = [r for r in done if r.status == 200]
    failed = [r for r in done if r.status != 200]
    by_status = {}
    for r in done:
        by_status[str(r.status)] = by_status.get(str(r.status), 0) + 1
    expected = args.clients * args.requests_per_client
    if len(done) < expected:
        by_status["not_finished"] = expected - len(done)
    tokens = sum(r.tokens for r in ok)
    ttfts = [r.ttft_s * 1000.0 for r in ok]
    out = {
        "url": args.url,
        "endpoint": args.endpoint,
        "model": args.model,
        "clients": args.clients,
        "requests_per_client": args.requests_per_client,
        "max_tokens": args.max_tokens,
        "wall_s": round(wall, 3),
        "requests_ok": len(ok),
        "requests_failed": expected - len(ok),
        "by_status": by_status,
        "generated_tokens": tokens,
        "tokens_from_usage": sum(1 for r in ok if r.usage_tokens is not None),
        "content_deltas": sum(r.delta_count for r in ok),
        "usage_completion_tokens": sum(r.usage_tokens or 0 for r in ok),
        "prompt_tokens": sum(r.prompt_tokens or 0 for r in ok),
        "cached_prompt_tokens": sum(r.cached_tokens or 0 for r in ok),
        "tok_per_s": round(tokens / wall, 3) if wall > 0 else None,
        "ttft_p50_ms": round(percentile(ttfts, 50), 2) if ttfts else None,
        "ttft_p99_ms": round(percentile(ttfts, 99), 2) if ttfts else None,
        "mean_latency_s": round(sum(r.latency_s for r in ok) / len(ok), 3) if ok else None,
        "run_timed_out": timed_out,
    }
    if failed:
        out["first_error"] = "%s: %s" % (failed[0].status, (failed[0].error or "")[:300])
    print(json.dumps(out, sort_keys=False))
    sys.stdout.flush()
    return 0 if len(ok) == expected else 1


if __name__ == "__main__":
    sys.exit(main())
