"""Compares two junit XML results of llama.cpp's server tests (scripts/llama-server-suite.sh).

Usage: compare.py LLAMA.xml GANTRY.xml INTERNALS.txt MISSES_OUT
M = the tests llama-server passed, less those matching a prefix in INTERNALS.txt (lines "PREFIX  # why";
a prefix is a test id "file.py::test_name[params]" or a leading part of one); N = those of M gantry
passed. Writes the others (M - N) to MISSES_OUT with their first failure line, and prints
"llama-server-suite: N of M".
"""
import sys
import xml.etree.ElementTree as ET


def results(path):
    out = {}
    try:
        open(path).close()
    except OSError:
        return out
    for case in ET.parse(path).getroot().iter("testcase"):
        name = case.get("classname", "").split(".")[-1] + ".py::" + case.get("name", "")
        bad = [c for c in case if c.tag in ("failure", "error", "skipped")]
        out[name] = (not bad, (bad[0].get("message") or "").splitlines()[0][:200] if bad else "")
    return out


def main():
    llama, gantry = results(sys.argv[1]), results(sys.argv[2])
    internals = []
    for line in open(sys.argv[3]):
        line = line.split("#", 1)[0].strip()
        if line:
            internals.append(line)
    passed = [t for t, (ok, _) in llama.items() if ok]
    excluded = [t for t in passed if any(t.startswith(p) for p in internals)]
    m = [t for t in passed if t not in excluded]
    n = [t for t in m if gantry.get(t, (False, ""))[0]]
    with open(sys.argv[4], "w") as f:
        for t in m:
            ok, why = gantry.get(t, (False, "not run"))
            if not ok:
                f.write(f"{t}\t{why}\n")
    print(f"llama-server passed {len(passed)} ({len(excluded)} of them test its own internals)")
    print(f"llama-server-suite: {len(n)} of {len(m)}")


main()
