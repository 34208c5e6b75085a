#!/usr/bin/env python3
"""Pins the official OpenAPI documents the conformance suite validates against (tests/conformance/specs/).

Not run by the tests: a maintainer runs it to re-pin (see README.md next to it). Each document is cut to
the paths `gantry serve` answers and every component those paths reach through $ref (the schemas are kept
verbatim; nothing else is changed), and written as JSON.

Usage: pin.py NAME UPSTREAM_FILE OUT.json PATH|#/POINTER...   (PATH as the upstream document spells it;
#/components/... also keeps a component no kept path reaches, such as an error body)
"""
import json
import sys

import yaml


def refs(node, out):
    if isinstance(node, dict):
        r = node.get("$ref")
        if isinstance(r, str) and r.startswith("#/"):
            out.add(r)
        for v in node.values():
            refs(v, out)
    elif isinstance(node, list):
        for v in node:
            refs(v, out)


def lookup(doc, pointer):
    node = doc
    for part in pointer[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def main():
    name, src, out_path, *paths = sys.argv[1:]
    with open(src) as f:
        doc = json.load(f) if src.endswith(".json") else yaml.safe_load(f)
    kept = {"openapi": doc["openapi"], "info": doc["info"], "paths": {}, "components": {}}
    extra = [p for p in paths if p.startswith("#/")]
    paths = [p for p in paths if not p.startswith("#/")]
    for p in paths:
        ops = doc["paths"][p]
        # Only what the responses say (requests are not validated: the suite checks what the server sends).
        kept["paths"][p] = {m: {"responses": op["responses"]} for m, op in ops.items() if isinstance(op, dict) and "responses" in op}
    seen, todo = set(), set()
    refs(kept["paths"], todo)
    todo.update(extra)
    while todo:
        r = todo.pop()
        if r in seen:
            continue
        seen.add(r)
        node = lookup(doc, r)
        parts = r[2:].split("/")
        target = kept
        for part in parts[:-1]:
            target = target.setdefault(part, {})
        target[parts[-1]] = node
        refs(node, todo)
    kept["x-pinned"] = {"name": name, "paths": paths, "components": len(seen)}
    with open(out_path, "w") as f:
        json.dump(kept, f, indent=1, sort_keys=False)
        f.write("\n")
    print(f"{name}: {len(paths)} paths, {len(seen)} components -> {out_path}")


if __name__ == "__main__":
    main()
