#!/usr/bin/env bash
# `gantry detect --json` against `lscpu --json`, run alternately in one session (after a warm-up),
# medians compared. Prints: BENCH detect-vs-lscpu ratio=<median gantry / median lscpu>. Goal <= 1.5.
# Run from the repository root; GANTRY_BIN overrides build/bin/gantry, RUNS the sample count.
set -euo pipefail
gantry=${GANTRY_BIN:-build/bin/gantry}
runs=${RUNS:-30}
[[ -x "$gantry" ]] || { echo "detect_vs_lscpu: $gantry is not built (run make build)" >&2; exit 1; }
command -v lscpu >/dev/null || { echo "detect_vs_lscpu: lscpu is missing (apt-get install util-linux)" >&2; exit 1; }
/usr/bin/python3 - "$gantry" "$(command -v lscpu)" "$runs" <<'PY'
import os, statistics, sys, time
gantry, lscpu, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
devnull = os.open(os.devnull, os.O_WRONLY)
actions = [(os.POSIX_SPAWN_DUP2, devnull, 1), (os.POSIX_SPAWN_DUP2, devnull, 2)]

def once(argv):
    t0 = time.perf_counter_ns()
    pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=actions)
    _, status = os.waitpid(pid, 0)
    t1 = time.perf_counter_ns()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"detect_vs_lscpu: {' '.join(argv)} failed")
    return (t1 - t0) / 1e6

cmds = {"gantry": [gantry, "detect", "--json"], "lscpu": [lscpu, "--json"],
        "startup": [gantry, "--version"], "true": ["/bin/true"]}
for _ in range(5):
    for argv in cmds.values():
        once(argv)
samples = {k: [] for k in cmds}
for _ in range(runs):
    for k, argv in cmds.items():
        samples[k].append(once(argv))
med = {k: statistics.median(v) for k, v in samples.items()}
print(f"BENCH detect-vs-lscpu ratio={med['gantry'] / med['lscpu']:.3f}")
print(f"medians over {runs} alternating runs: gantry detect --json {med['gantry']:.3f} ms, "
      f"lscpu --json {med['lscpu']:.3f} ms (context: gantry --version {med['startup']:.3f} ms, /bin/true {med['true']:.3f} ms)")
PY
