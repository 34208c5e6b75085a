# Shared by the tests/scripts/serve_*.sh tests (sourced, not run: ctest runs only tests/scripts/*.sh).
# They start `gantry serve` in the background with its pid in $pid.

# A free loopback TCP port.
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Stops the server in $pid with SIGTERM (its drain) and waits up to 10 s; kills it and returns 1 when it
# does not exit in time.
stop_server() {
  [[ -n "$pid" ]] || return 0
  kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    echo "FAIL: gantry serve did not exit within 10 s of SIGTERM; killing it"
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    pid=""
    return 1
  fi
  wait "$pid" 2>/dev/null
  pid=""
}

# wait_ready URL LOG [SECONDS]: waits until URL/v2/health/ready answers 200 while $pid lives; prints the
# log's tail and returns 1 otherwise.
wait_ready() {
  local url=$1 log=$2 deadline=$((SECONDS + ${3:-60}))
  while ((SECONDS < deadline)); do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "FAIL: gantry serve exited before it was ready:"; tail -20 "$log"; pid=""; return 1
    fi
    [[ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$url/v2/health/ready")" == 200 ]] && return 0
    sleep 0.25
  done
  echo "FAIL: $url/v2/health/ready not 200 within ${3:-60} s:"; tail -20 "$log"
  return 1
}
