#!/usr/bin/env bash
# Dependencies point downward only, and the build enforces it: each library is compiled with an include
# root that holds its own subsystem's headers and those of what it links (cmake/GantryTargets.cmake).
# Compiles one-line files with the exact flags the build uses for a source of a given library
# (from compile_commands.json) and checks that an upward include fails while a downward one compiles.
set -euo pipefail
build=${1:?usage: upward_include.sh BUILD_DIR}
db="$build/compile_commands.json"
[[ -f "$db" ]] || { echo "FAIL: $db is missing (CMAKE_EXPORT_COMPILE_COMMANDS)"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# check SOURCE_OF_LIBRARY HEADER ok|fail: compiles `#include "HEADER"` as if it were SOURCE_OF_LIBRARY.
/usr/bin/python3 - "$db" "$tmp" "$PWD" <<'PY'
import json, os, shlex, subprocess, sys
db, tmp, src_dir = sys.argv[1], sys.argv[2], sys.argv[3]
entries = json.load(open(db))

def flags_for(source):
    for e in entries:
        if os.path.normpath(e["file"]).endswith(os.path.normpath(source)):
            args = e["arguments"] if "arguments" in e else shlex.split(e["command"])
            out, skip = [], False
            for a in args:
                if skip:
                    skip = False
                    continue
                if a in ("-o", "-c", "-MF", "-MT", "-MQ"):
                    skip = True
                    continue
                if a == e["file"] or a.endswith(source) or a in ("-MD", "-MMD"):
                    continue
                out.append(a)
            return out, e["directory"]
    sys.exit(f"FAIL: no compile command for {source} in {db}")

cases = [
    # (a source of the library whose flags are used, header to include, should it compile?)
    ("src/hw/registry.cpp", "gantry/core/status.h", True),
    ("src/hw/registry.cpp", "gantry/hw/registry.h", True),
    ("src/hw/registry.cpp", "gantry/backend/backend.h", False),
    ("src/hw/registry.cpp", "gantry/model/manifest.h", False),
    ("src/hw/registry.cpp", "gantry/plan/planner.h", False),
    ("src/core/status.cpp", "gantry/hw/registry.h", False),
    ("src/model/manifest.cpp", "gantry/backend/model.h", False),
    ("src/backend/loader.cpp", "gantry/hw/detect.h", True),
    ("src/backend/loader.cpp", "gantry/backend/onnx/onnx_backend.h", False),
    ("src/backend/loader.cpp", "gantry/backend/llama/llama_backend.h", False),
    ("src/backend/onnx/onnx_backend.cpp", "gantry/backend/model.h", True),
    ("src/backend/onnx/onnx_backend.cpp", "gantry/backend/llama/llama_backend.h", False),
    ("src/runtime/dynamic_batcher.cpp", "gantry/server/server.h", False),  # scheduling is below the server
    ("src/server/server.cpp", "gantry/runtime/dynamic_batcher.h", True),
    ("src/hw/registry.cpp", "gantry/build_info.h", True),  # generated headers stay visible
    # ONNX Runtime's headers are the ONNX backend's own: its public headers compile without them.
    ("src/backend/onnx/onnx_model.cpp", "onnxruntime_cxx_api.h", True),
    ("src/runtime/runtime.cpp", "onnxruntime_cxx_api.h", False),
    ("src/runtime/runtime.cpp", "gantry/backend/onnx/onnx_model.h", True),
    ("src/runtime/runtime.cpp", "gantry/backend/onnx/ort_env.h", True),
]
bad = 0
for i, (source, header, want_ok) in enumerate(cases):
    flags, directory = flags_for(source)
    probe = os.path.join(tmp, f"probe{i}.cpp")
    with open(probe, "w") as f:
        f.write(f'#include "{header}"\n')
    r = subprocess.run(flags + ["-fsyntax-only", probe], cwd=directory, capture_output=True, text=True)
    ok = r.returncode == 0
    missing = "No such file" in r.stderr or "file not found" in r.stderr
    if want_ok and not ok:
        print(f"FAIL: {header} should compile with the flags of {source}:\n{r.stderr[:2000]}")
        bad += 1
    elif not want_ok and ok:
        print(f"FAIL: {header} compiled with the flags of {source}: an upward include is not blocked")
        bad += 1
    elif not want_ok and not missing:
        print(f"FAIL: {header} with the flags of {source} failed, but not because it is invisible:\n{r.stderr[:2000]}")
        bad += 1
    else:
        print(f"ok: {source} {'sees' if want_ok else 'cannot see'} {header}")
sys.exit(1 if bad else 0)
PY
