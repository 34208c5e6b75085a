#!/usr/bin/env bash
# gantry serve's rerank API (POST /v1/rerank and /rerank, llama-server's shape) with curl against the
# generated tiny reranker (tiny-reranker.gguf, pooling rank): the answer's shape, results sorted by
# relevance_score, top_n, return_documents, the same document scoring the same, the 400s (a model that is
# not a reranker, a missing query, documents that are not strings, a bad top_n, a pair longer than the
# context), and /v1/embeddings (and Ollama's /api/embed) refusing the reranker and a model whose pooling
# is none (tiny-pooling-none.gguf) while tiny-llama still embeds.
# Usage: serve_rerank.sh BUILD_DIR   (run from the source dir)
set -uo pipefail
BUILD=${1:?usage: serve_rerank.sh BUILD_DIR}
DEPS=${GANTRY_DEPS_DIR:-$(pwd)/.cache}
GANTRY=$BUILD/bin/gantry
RERANKER=$DEPS/models/tiny-reranker.gguf
LLAMA=$DEPS/models/tiny-llama.gguf
NONE=$DEPS/models/tiny-pooling-none.gguf  # declares pooling none
PY=/usr/bin/python3

[[ -x "$GANTRY" ]] || { echo "FAIL: $GANTRY not built"; exit 1; }
for m in "$RERANKER" "$LLAMA" "$NONE"; do
  [[ -f "$m" ]] || { echo "FAIL: $m missing (run scripts/setup.sh: scripts/models/*.py generate it)"; exit 1; }
done

tmp=$(mktemp -d)
pid=""
source "$(dirname "$0")/lib/serve_common.sh"  # free_port, stop_server, wait_ready
trap 'stop_server; rm -rf "$tmp"' EXIT

port=$(free_port)
base="http://127.0.0.1:$port"
"$GANTRY" serve "$RERANKER" "$LLAMA" "$NONE" --host 127.0.0.1 --port "$port" --ctx 512 --parallel 2 --threads 1 \
  >"$tmp/server.log" 2>&1 &
pid=$!
wait_ready "$base" "$tmp/server.log" 60 || exit 1

failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# post NAME METHOD PATH [BODY]: the answer's body in $tmp/NAME.json, its status in $tmp/NAME.code.
post() {
  local name=$1 method=$2 path=$3 body=${4-}
  if [[ -n "$body" ]]; then
    curl -s -m 60 -X "$method" -H 'Content-Type: application/json' -d "$body" -o "$tmp/$name.json" \
      -w '%{http_code}' "$base$path" >"$tmp/$name.code"
  else
    curl -s -m 60 -X "$method" -o "$tmp/$name.json" -w '%{http_code}' "$base$path" >"$tmp/$name.code"
  fi
}

# expect NAME CODE: the status of NAME was CODE.
expect() {
  local got; got=$(cat "$tmp/$1.code")
  [[ "$got" == "$2" ]] || { fail "$1: HTTP $got, want $2: $(head -c 400 "$tmp/$1.json")"; return 1; }
}

# check NAME PYTHON: runs PYTHON with `r` = NAME's JSON answer (and the helpers `load(name)`); a failed
# assert is a failure named NAME.
check() {
  local name=$1 code=$2
  if ! out=$(TMP="$tmp" "$PY" - "$name" 2>&1 <<PYEOF
import json, os, sys
def load(n):
    with open(os.path.join(os.environ["TMP"], n + ".json")) as f:
        return json.load(f)
r = load(sys.argv[1])
$code
PYEOF
  ); then
    fail "$name: $out"
  fi
}

Q='What is the capital of France?'
DOCS='["The capital of France is Paris.", "Bananas are yellow.", "Paris is a city in France.", "The capital of France is Paris."]'

# The answer's shape, sorted by relevance_score, every document once.
post full POST /v1/rerank "{\"model\":\"tiny-reranker\",\"query\":\"$Q\",\"documents\":$DOCS}"
expect full 200 && check full '
assert r["model"] == "tiny-reranker", r
assert r["object"] == "list", r
u = r["usage"]
assert u["prompt_tokens"] > 0 and u["total_tokens"] == u["prompt_tokens"], u
res = r["results"]
assert sorted(x["index"] for x in res) == [0, 1, 2, 3], res
scores = [x["relevance_score"] for x in res]
assert scores == sorted(scores, reverse=True), "not sorted by relevance_score: %s" % scores
assert all(0 < s < 1 for s in scores), scores  # a Qwen3-style head: P(yes)
assert all("document" not in x for x in res), "documents returned unasked: %s" % res
by = {x["index"]: x["relevance_score"] for x in res}
# The same document twice: the same score up to float rounding; different ones differ by far more.
assert abs(by[0] - by[3]) < 1e-5, "the same document scored %s and %s" % (by[0], by[3])
for i, j in ((0, 1), (1, 2), (0, 2)):
    assert abs(by[i] - by[j]) > 1e-3, "documents %d and %d scored alike: %s" % (i, j, by)
'

# /rerank is the same endpoint; a second call gives the same scores.
post plain POST /rerank "{\"model\":\"tiny-reranker\",\"query\":\"$Q\",\"documents\":$DOCS}"
expect plain 200 && check plain '
full = load("full")
a = {x["index"]: x["relevance_score"] for x in full["results"]}
b = {x["index"]: x["relevance_score"] for x in r["results"]}
assert a == b, "/rerank %s != /v1/rerank %s (the same request)" % (b, a)
assert r["usage"] == full["usage"], (r["usage"], full["usage"])
'

# top_n: the best n; return_documents: each result carries its text.
post top POST /v1/rerank "{\"model\":\"tiny-reranker\",\"query\":\"$Q\",\"documents\":$DOCS,\"top_n\":2,\"return_documents\":true}"
expect top 200 && check top '
full = load("full")["results"]
res = r["results"]
assert len(res) == 2, res
assert [x["index"] for x in res] == [x["index"] for x in full[:2]], (res, full)
texts = ["The capital of France is Paris.", "Bananas are yellow.", "Paris is a city in France.",
         "The capital of France is Paris."]
for x in res:
    assert x["document"] == {"text": texts[x["index"]]}, x
'
post topbig POST /v1/rerank "{\"model\":\"tiny-reranker\",\"query\":\"q\",\"documents\":[\"a\",\"b\"],\"top_n\":10,\"return_documents\":false}"
expect topbig 200 && check topbig 'assert len(r["results"]) == 2 and all("document" not in x for x in r["results"]), r'

# An error names its field (OpenAI's error shape).
bad() {  # bad NAME CODE PARAM TEXT PATH BODY
  local name=$1 code=$2 param=$3 text=$4
  post "$name" POST "$5" "$6"
  expect "$name" "$code" && WANT_PARAM=$param WANT_TEXT=$text check "$name" '
e = r["error"]
assert (e["param"] or "") == os.environ["WANT_PARAM"], e
assert os.environ["WANT_TEXT"] in e["message"], e
'
}
bad not_reranker 400 model "not a reranking model: its pooling is mean" /v1/rerank \
  '{"model":"tiny-llama","query":"q","documents":["a"]}'
bad not_reranker_none 400 model "not a reranking model: its pooling is none" /rerank \
  '{"model":"tiny-pooling-none","query":"q","documents":["a"]}'
bad no_query 400 query "'query' is required" /v1/rerank '{"model":"tiny-reranker","documents":["a"]}'
bad query_type 400 query "must be a string" /rerank '{"model":"tiny-reranker","query":7,"documents":["a"]}'
bad doc_types 400 documents "documents[1]" /v1/rerank '{"model":"tiny-reranker","query":"q","documents":["a",{"text":"b"}]}'
bad no_docs 400 documents "non-empty array" /v1/rerank '{"model":"tiny-reranker","query":"q","documents":[]}'
bad docs_string 400 documents "non-empty array" /v1/rerank '{"model":"tiny-reranker","query":"q","documents":"a"}'
bad top_neg 400 top_n ">= 0" /v1/rerank '{"model":"tiny-reranker","query":"q","documents":["a"],"top_n":-1}'
bad top_type 400 top_n "integer" /v1/rerank '{"model":"tiny-reranker","query":"q","documents":["a"],"top_n":"2"}'
bad ret_type 400 return_documents "boolean" /v1/rerank '{"model":"tiny-reranker","query":"q","documents":["a"],"return_documents":1}'
bad no_model 400 model "'model' is required" /v1/rerank '{"query":"q","documents":["a"]}'
bad unknown 404 model "no-such" /v1/rerank '{"model":"no-such","query":"q","documents":["a"]}'
bad not_json 400 "" "" /v1/rerank '{"model":'
long=$("$PY" -c 'print(" ".join(["word"] * 1500))')
bad too_long 400 documents "documents[1]" /v1/rerank "{\"model\":\"tiny-reranker\",\"query\":\"q\",\"documents\":[\"a\",\"$long\"]}"
check too_long 'assert r["error"]["code"] == "context_length_exceeded", r'
post get GET /v1/rerank
expect get 405

# The server still answers after every refusal.
post again POST /rerank '{"model":"tiny-reranker","query":"q","documents":["a"]}'
expect again 200 && check again 'assert len(r["results"]) == 1 and r["results"][0]["index"] == 0, r'

# /v1/embeddings honours the pooling: the reranker is refused with a pointer to /v1/rerank, a model that
# declares pooling none is refused (llama-server: "Pooling type 'none' is not OAI compatible"), tiny-llama
# (which declares no pooling at all: Gantry pools it by the mean) still embeds; Ollama's /api/embed refuses
# the reranker too.
bad embed_reranker 400 model "use /v1/rerank" /v1/embeddings '{"model":"tiny-reranker","input":"hello"}'
bad embed_none 400 model "its pooling is none" /v1/embeddings '{"model":"tiny-pooling-none","input":"hello"}'
post embed_llama POST /v1/embeddings '{"model":"tiny-llama","input":"hello"}'
expect embed_llama 200 && check embed_llama 'assert len(r["data"]) == 1 and len(r["data"][0]["embedding"]) == 64, r'
post ollama_embed POST /api/embed '{"model":"tiny-reranker","input":"hello"}'
expect ollama_embed 400 && check ollama_embed 'assert "pooling is rank" in r["error"], r'
# A reranker does not generate text.
post chat POST /v1/chat/completions '{"model":"tiny-reranker","messages":[{"role":"user","content":"hi"}]}'
expect chat 400 && check chat 'assert r["error"]["param"] == "model", r'

stop_server || fail "the server did not drain on SIGTERM"
if ((failures)); then
  echo "--- gantry serve log (tail)"; tail -30 "$tmp/server.log"
  echo "serve_rerank: $failures failure(s)"
  exit 1
fi
echo "serve_rerank: all passed"
