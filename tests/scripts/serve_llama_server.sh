#!/usr/bin/env bash
# `gantry serve` as a drop-in for llama-server (docs/llama-server.md), with curl against tiny-llama.gguf and
# tiny-reranker.gguf: a llama-server command line starts (-m, --alias, --api-key LIST, --temp, --seed, -n,
# -c, -np, -ctk/-ctv, --jinja, --embedding, --no-slots, --metrics, --host LIST); a flag Gantry cannot honour
# is refused by name; /health is public and llama-server's JSON; any model name (or none) is the one
# model; the OpenAI routes answer without /v1; llama-server's own API (/props, /completion plain and
# streamed with timings, n_probs and return_tokens, grammar, /tokenize with pieces, /detokenize,
# /apply-template, /infill refused for a model without FIM tokens, /slots 501); a top-level json_schema on
# chat; the rerank aliases (/v1/reranking, /v2/rerank) and TEI's shape (texts in, an array out).
# Usage: serve_llama_server.sh BUILD_DIR   (run from the source dir)
set -uo pipefail
BUILD=${1:?usage: serve_llama_server.sh BUILD_DIR}
DEPS=${GANTRY_DEPS_DIR:-$(pwd)/.cache}
GANTRY=$BUILD/bin/gantry
LLAMA=$DEPS/models/tiny-llama.gguf
RERANKER=$DEPS/models/tiny-reranker.gguf
PY=/usr/bin/python3

[[ -x "$GANTRY" ]] || { echo "FAIL: $GANTRY not built"; exit 1; }
for m in "$LLAMA" "$RERANKER"; do
  [[ -f "$m" ]] || { echo "FAIL: $m missing (run scripts/setup.sh: scripts/models/*.py generate it)"; exit 1; }
done

tmp=$(mktemp -d)
pid=""
source "$(dirname "$0")/lib/serve_common.sh"  # free_port, stop_server, wait_ready
trap 'stop_server; rm -rf "$tmp"' EXIT

failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
KEY=sk-llama-test

# req NAME METHOD PATH [BODY]: with the key; the body in $tmp/NAME.json, the status in $tmp/NAME.code.
req() {
  local name=$1 method=$2 path=$3 body=${4-}
  local args=(-s -m 60 -X "$method" -H "Authorization: Bearer $KEY" -o "$tmp/$name.json" -w '%{http_code}')
  [[ -n "$body" ]] && args+=(-H 'Content-Type: application/json' -d "$body")
  curl "${args[@]}" "$base$path" >"$tmp/$name.code"
}
expect() {
  local got; got=$(cat "$tmp/$1.code")
  [[ "$got" == "$2" ]] || { fail "$1: HTTP $got, want $2: $(head -c 400 "$tmp/$1.json")"; return 1; }
}
# check NAME PYTHON: `r` is NAME's JSON answer (`raw` its text); a failed assert fails NAME.
check() {
  local name=$1 code=$2
  if ! out=$(TMP="$tmp" "$PY" - "$name" 2>&1 <<PYEOF
import json, os, sys
raw = open(os.path.join(os.environ["TMP"], sys.argv[1] + ".json")).read()
try:
    r = json.loads(raw)
except ValueError:
    r = None
$code
PYEOF
  ); then
    fail "$name: $out"
  fi
}

# A flag Gantry cannot honour is refused by name, with its reason, before anything loads.
"$GANTRY" serve -m "$LLAMA" --lora adapter.gguf >"$tmp/refused.log" 2>&1
rc=$?
[[ $rc == 2 ]] || fail "--lora: exit $rc, want 2"
grep -q "llama-server's --lora is not supported: .*LoRA" "$tmp/refused.log" || fail "--lora: $(cat "$tmp/refused.log")"
"$GANTRY" serve -m "$LLAMA" -ctk f16 -ctv q8_0 >"$tmp/kv.log" 2>&1
[[ $? == 2 ]] && grep -q "one type for K and V" "$tmp/kv.log" || fail "-ctk f16 -ctv q8_0: $(cat "$tmp/kv.log")"

# IPv6 loopback may be missing in a container: then one address.
hosts=127.0.0.1
"$PY" -c 'import socket; s=socket.socket(socket.AF_INET6); s.bind(("::1",0))' 2>/dev/null && hosts=127.0.0.1,::1

port=$(free_port)
base="http://127.0.0.1:$port"
"$GANTRY" serve --port "$port" --temp 0.8 --seed 42 --host "$hosts" --model "$LLAMA" --alias tinyllama-2 \
  --api-key "$KEY,other-key" -c 512 -np 2 -n 16 -ctk f16 -ctv f16 --jinja --embedding --no-slots --metrics \
  --offline --no-webui --threads 1 --grpc-port -1 >"$tmp/server.log" 2>&1 &
pid=$!
deadline=$((SECONDS + 60))
until [[ "$(curl -s -o /dev/null -w '%{http_code}' "$base/health")" == 200 ]]; do
  kill -0 "$pid" 2>/dev/null || { echo "FAIL: gantry serve exited:"; tail -20 "$tmp/server.log"; exit 1; }
  ((SECONDS < deadline)) || { echo "FAIL: /health not 200 within 60 s"; tail -20 "$tmp/server.log"; exit 1; }
  sleep 0.25
done

# /health: public, llama-server's body.
curl -s -o "$tmp/health.json" -w '%{http_code}' "$base/health" >"$tmp/health.code"
expect health 200 && check health 'assert r == {"status": "ok"}, r'
# Everything else needs one of the keys.
curl -s -o "$tmp/nokey.json" -w '%{http_code}' -X POST -d '{}' "$base/v1/completions" >"$tmp/nokey.code"
expect nokey 401
if [[ $hosts == *::1* ]]; then
  curl -s -o "$tmp/v6.json" -w '%{http_code}' -H 'Authorization: Bearer other-key' "http://[::1]:$port/models" \
    >"$tmp/v6.code"
  expect v6 200
fi

# /models (no /v1) lists the alias.
req models GET /models
expect models 200 && check models 'assert [m["id"] for m in r["data"]] == ["tinyllama-2"], r'

# Any model name, or none, is the one model; chat without /v1.
req chat_any POST /chat/completions '{"model":"gpt-3.5-turbo","messages":[{"role":"user","content":"Hi"}],"max_tokens":4}'
expect chat_any 200 && check chat_any 'assert r["choices"][0]["message"]["role"] == "assistant", r'
req chat_none POST /v1/chat/completions '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":4}'
expect chat_none 200

# /props: the slots, the context per slot, the --seed and -n given.
req props GET /props
expect props 200 && check props '
d = r["default_generation_settings"]
assert r["total_slots"] == 2, r
assert d["n_ctx"] == 256, d
assert d["params"]["seed"] == 42 and d["params"]["n_predict"] == 16, d
assert abs(d["params"]["temperature"] - 0.8) < 1e-6, d
assert r["model_path"].endswith(".gguf"), r'

# /completion: -n 16 is the default length; timings; n_probs; return_tokens.
req completion POST /completion '{"prompt":"Once upon a time","n_probs":2,"return_tokens":true,"seed":1}'
expect completion 200 && check completion '
assert r["stop"] is True and isinstance(r["content"], str), r
assert 1 <= r["tokens_predicted"] <= 16, r
assert r["stop_type"] in ("eos", "limit"), r
assert len(r["tokens"]) == r["tokens_predicted"], r
t = r["timings"]
assert t["predicted_n"] == r["tokens_predicted"] and t["prompt_n"] + t["cache_n"] == r["tokens_evaluated"], t
p = r["completion_probabilities"]
assert len(p) == r["tokens_predicted"] and all(len(x["top_logprobs"]) == 2 for x in p), p'
# Token ids and a mixed prompt.
req completion_ids POST /completion '{"prompt":[1, 100, "upon a time"],"n_predict":4}'
expect completion_ids 200 && check completion_ids 'assert r["tokens_evaluated"] >= 3, r'
# Streamed: data events, the last with stop true and timings, no [DONE].
curl -s -m 60 -N -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' \
  -d '{"prompt":"Once upon a time","n_predict":8,"stream":true}' "$base/completion" >"$tmp/stream.json"
check stream '
events = [json.loads(l[6:]) for l in raw.splitlines() if l.startswith("data: ")]
assert "[DONE]" not in raw, raw
assert len(events) >= 2, raw
assert all(e["stop"] is False for e in events[:-1]) and events[-1]["stop"] is True, events
assert "timings" in events[-1] and events[-1]["tokens_predicted"] <= 8, events[-1]
assert "".join(e["content"] for e in events[:-1]), events'
# A grammar constrains the text.
req grammar POST /completion '{"prompt":"Answer:","n_predict":8,"grammar":"root ::= \"yes\" | \"no\""}'
expect grammar 200 && check grammar 'assert r["content"] in ("yes", "no"), r'
# A top-level json_schema on chat (llama-server's extension).
req schema POST /v1/chat/completions '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":64,"json_schema":{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}}'
expect schema 200 && check schema '
c = r["choices"][0]
if c["finish_reason"] == "stop":
    assert isinstance(json.loads(c["message"]["content"])["a"], int), c'
req grammar_both POST /completion '{"prompt":"x","grammar":"root ::= \"a\"","json_schema":{"type":"object"}}'
expect grammar_both 400

# /tokenize and /detokenize.
req tok POST /tokenize '{"content":"What is the capital of France ?","add_special":true}'
expect tok 200 && check tok 'assert r["tokens"][0] == 1 and len(r["tokens"]) > 5, r'
ids=$("$PY" -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["tokens"][1:]))' "$tmp/tok.json")
req detok POST /detokenize "{\"tokens\":$ids}"
expect detok 200 && check detok 'assert r["content"].strip() == "What is the capital of France ?", r'
req pieces POST /tokenize '{"content":"unicode 媽 and emoji 🤗","with_pieces":true}'
expect pieces 200 && check pieces 'assert all(t["id"] > 0 and len(t["piece"]) > 0 for t in r["tokens"]), r'
req detok_bad POST /detokenize '{"tokens":[99999999]}'
expect detok_bad 400

# /apply-template renders the chat without generating.
req template POST /apply-template '{"messages":[{"role":"user","content":"What is 2+2?"}]}'
expect template 200 && check template 'assert "What is 2+2?" in r["prompt"], r'

# /infill: tiny-llama has no fill-in-the-middle tokens: a clear 400.
req infill POST /infill '{"input_prefix":"def f(","input_suffix":"):\n    return 1\n"}'
expect infill 400 && check infill 'assert "does not support infill" in r["error"]["message"], r'
# /slots: off, as llama-server with --no-slots.
req slots GET /slots
expect slots 501
stop_server

# The reranker, llama-server's way: the aliases and TEI's shape.
port=$(free_port)
base="http://127.0.0.1:$port"
# (--api-key before -m: the key list must not swallow the model.)
"$GANTRY" serve --api-key "$KEY" -m "$RERANKER" --reranking --port "$port" -c 512 -np 1 --threads 1 --grpc-port -1 \
  >"$tmp/rerank.log" 2>&1 &
pid=$!
wait_ready "$base" "$tmp/rerank.log" 60 || exit 1
DOCS='["The capital of France is Paris.", "Bananas are yellow.", "Paris is in France."]'
for path in /v1/reranking /v2/rerank /reranking; do
  n=${path//\//_}
  req "r$n" POST "$path" "{\"query\":\"capital of France\",\"documents\":$DOCS,\"top_n\":2}"
  expect "r$n" 200 && check "r$n" 'assert len(r["results"]) == 2 and r["results"][0]["relevance_score"] >= r["results"][1]["relevance_score"], r'
done
req tei POST /rerank "{\"query\":\"capital of France\",\"texts\":$DOCS,\"return_text\":true}"
expect tei 200 && check tei '
assert isinstance(r, list) and len(r) == 3, r
assert sorted(x["index"] for x in r) == [0, 1, 2] and r[0]["score"] >= r[-1]["score"], r
assert all(x["text"] for x in r), r'
req tei_bad POST /rerank '{"query":"q","texts":"a"}'
expect tei_bad 400 && check tei_bad 'assert r["error"]["param"] == "texts", r'
stop_server || fail "the reranker did not stop"

if ((failures)); then
  echo "--- gantry serve log (tail)"; tail -30 "$tmp/server.log"
  echo "FAIL: $failures llama-server drop-in checks failed"
  exit 1
fi
echo "PASS: gantry serve takes llama-server's command line and answers its API"
