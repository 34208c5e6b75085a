# Servers for the serving benchmarks (sourced by bench/serve_gguf_vs_llama_server.sh and bench/serve_goodput.sh):
# start one on a free loopback port, wait until it is ready, stop them all. The caller sets $tmp (logs go to
# $tmp/NAME.log) and READY_TIMEOUT_S.
# url[NAME] is its base URL, pid[NAME] its process.
declare -A pid url

stop_servers() {
  local p
  for p in "${pid[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${pid[@]}"; do
    for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null
    wait "$p" 2>/dev/null
  done
  pid=()
}

free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }

# wait_ready NAME PATH: polls until HTTP 200, the server exits, or READY_TIMEOUT_S passes.
wait_ready() {
  local s=$1 path=$2 deadline=$((SECONDS + READY_TIMEOUT_S))
  while ((SECONDS < deadline)); do
    kill -0 "${pid[$s]}" 2>/dev/null || { echo "$s exited before it was ready: $(tail -5 "$tmp/$s.log")" >&2; return 1; }
    [[ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "${url[$s]}$path")" == 200 ]] && return 0
    sleep 0.25
  done
  echo "$s ${url[$s]}$path not ready within ${READY_TIMEOUT_S} s: $(tail -5 "$tmp/$s.log")" >&2
  return 1
}

# start_server NAME READY_PATH COMMAND...: runs COMMAND in the background with @PORT@ replaced by a free port,
# then waits until READY_PATH answers 200.
start_server() {
  local s=$1 ready=$2 port arg cmd=()
  shift 2
  port=$(free_port) || return 1
  for arg in "$@"; do cmd+=("${arg//@PORT@/$port}"); done
  url[$s]="http://127.0.0.1:$port"
  "${cmd[@]}" >"$tmp/$s.log" 2>&1 &
  pid[$s]=$!
  wait_ready "$s" "$ready"
}
