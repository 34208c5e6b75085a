#!/usr/bin/env python3
"""Makes the schema fixtures under tests/fixtures/k8s/ from the upstream files (see SOURCES.md there).

    extract_schemas.py SWAGGER_JSON CSR_CRD_YAML ISVC_CRD_YAML OUT_DIR

Kubernetes: from the OpenAPI v2 document (api/openapi-spec/swagger.json of a release branch), the
definitions the manifests in deploy/ use (the roots below) and every definition they reach by $ref,
unchanged but for their `description`s. KServe: each CRD's openAPIV3Schema of its stored version, with
the `description`s removed. Dropping descriptions only (prose) changes no validation outcome; it takes
the fixtures from 6 MB to a size fit for a repository.
"""
import json
import sys

import yaml

ROOTS = [
    "io.k8s.api.apps.v1.Deployment",
    "io.k8s.api.core.v1.Service",
    "io.k8s.api.core.v1.ServiceAccount",
    "io.k8s.api.autoscaling.v2.HorizontalPodAutoscaler",
    "io.k8s.api.policy.v1.PodDisruptionBudget",
]


def strip(node, in_properties=False):
    """`node` without `description` keys (a property *named* description is kept)."""
    if isinstance(node, dict):
        return {k: strip(v, k == "properties") for k, v in node.items() if in_properties or k != "description"}
    if isinstance(node, list):
        return [strip(v) for v in node]
    return node


def refs(node):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str):
                yield v.rsplit("/", 1)[-1]
            else:
                yield from refs(v)
    elif isinstance(node, list):
        for v in node:
            yield from refs(v)


def main(swagger_path, csr_path, isvc_path, out):
    swagger = json.load(open(swagger_path))
    defs = swagger["definitions"]
    keep, todo = {}, list(ROOTS)
    while todo:
        name = todo.pop()
        if name in keep:
            continue
        keep[name] = strip(defs[name])
        todo.extend(refs(defs[name]))
    with open(f"{out}/kubernetes-definitions.json", "w") as f:
        json.dump({"definitions": dict(sorted(keep.items()))}, f, indent=1, sort_keys=True)
        f.write("\n")
    for path, kind in ((csr_path, "ClusterServingRuntime"), (isvc_path, "InferenceService")):
        crd = yaml.safe_load(open(path))
        assert crd["spec"]["names"]["kind"] == kind, path
        version = next(v for v in crd["spec"]["versions"] if v.get("storage"))
        doc = {
            "group": crd["spec"]["group"],
            "version": version["name"],
            "kind": kind,
            "scope": crd["spec"]["scope"],
            "openAPIV3Schema": strip(version["schema"]["openAPIV3Schema"]),
        }
        with open(f"{out}/kserve-{kind}.json", "w") as f:
            json.dump(doc, f, indent=None, separators=(",", ":"), sort_keys=True)
            f.write("\n")


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    main(*sys.argv[1:])
