#!/usr/bin/env python3
"""Validates Kubernetes manifests against the real schemas kept under tests/fixtures/k8s/.

    validate_manifests.py [--expect-invalid] FILE_OR_DIR...

Every YAML document must be an object of a kind we hold the schema of: Kubernetes' own (the OpenAPI
definitions of release 1.34, picked by their x-kubernetes-group-version-kind) or KServe's
(ClusterServingRuntime, InferenceService: the CRDs' openAPIV3Schema of KServe v0.20.0, with
metadata checked as Kubernetes' ObjectMeta). Checking is strict, like `kubeconform -strict`: a field
the schema does not declare is an error (a typo is never silently ignored), except where the schema
says unknown fields are kept (x-kubernetes-preserve-unknown-fields) or takes a map
(additionalProperties). OpenAPI's int-or-string and Kubernetes' Quantity take a number or a string,
`nullable` takes null.

Then checks the API server or KServe's webhook would make that no schema states: a Deployment's
selector matches its pod template's labels, a Service selects the pods of a Deployment in the same
files, an HPA scales a Deployment in them, probe and Service target ports name a container port,
names are DNS labels, KServe protocol versions are ones KServe knows.

Exit 0 when every document is valid (with --expect-invalid: when every FILE holds at least one
error), else 1; each error names the file, the document and the field.
"""
import copy
import json
import os
import re
import sys

import jsonschema
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "fixtures", "k8s")
KSERVE_PROTOCOLS = {"v1", "v2", "grpc-v1", "grpc-v2"}  # KServe's constants.InferenceServiceProtocol
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
ANY_NUMBER_OR_STRING = {"anyOf": [{"type": "integer"}, {"type": "number"}, {"type": "string"}]}
INT_OR_STRING = {"anyOf": [{"type": "integer"}, {"type": "string"}]}


def strict(node):
    """An OpenAPI schema as a strict JSON Schema (draft 4): see the module's docstring."""
    if isinstance(node, list):
        return [strict(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {}
    if node.get("format") == "int-or-string" or node.get("x-kubernetes-int-or-string"):
        # A CRD's already says anyOf integer/string; a `pattern` applies to the string only.
        node = {k: v for k, v in node.items() if k not in ("type", "anyOf")}
        out["anyOf"] = INT_OR_STRING["anyOf"]
    for k, v in node.items():
        if k == "properties":
            out[k] = {name: strict(s) for name, s in v.items()}
        elif k.startswith("x-kubernetes-") or k in ("nullable", "format"):
            continue
        else:
            out[k] = strict(v)
    preserve = node.get("x-kubernetes-preserve-unknown-fields", False)
    if "properties" in node and "additionalProperties" not in node and not preserve:
        out["additionalProperties"] = False
    if node.get("nullable"):
        out = {"anyOf": [out, {"type": "null"}]}
    return out


def load_schemas():
    """(apiVersion, kind) -> a JSON Schema with every definition it may $ref."""
    with open(os.path.join(FIXTURES, "kubernetes-definitions.json")) as f:
        k8s = json.load(f)["definitions"]
    defs = {name: strict(d) for name, d in k8s.items()}
    defs["io.k8s.apimachinery.pkg.util.intstr.IntOrString"] = INT_OR_STRING
    defs["io.k8s.apimachinery.pkg.api.resource.Quantity"] = ANY_NUMBER_OR_STRING
    schemas = {}
    for name, d in k8s.items():
        for gvk in d.get("x-kubernetes-group-version-kind", []):
            api = gvk["version"] if not gvk["group"] else f"{gvk['group']}/{gvk['version']}"
            schemas[(api, gvk["kind"])] = {"$ref": f"#/definitions/{name}", "definitions": defs}
    for kind in ("ClusterServingRuntime", "InferenceService"):
        with open(os.path.join(FIXTURES, f"kserve-{kind}.json")) as f:
            crd = json.load(f)
        root = strict(copy.deepcopy(crd["openAPIV3Schema"]))
        root["properties"]["metadata"] = {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}
        root["required"] = sorted(set(root.get("required", [])) | {"apiVersion", "kind", "metadata"})
        root["definitions"] = defs
        schemas[(f"{crd['group']}/{crd['version']}", kind)] = root
    return schemas


def documents(paths):
    for p in paths:
        files = [os.path.join(d, f) for d, _, fs in os.walk(p) for f in sorted(fs)] if os.path.isdir(p) else [p]
        for f in sorted(files):
            if not f.endswith((".yaml", ".yml")):
                continue
            with open(f) as fh:
                for i, doc in enumerate(yaml.safe_load_all(fh)):
                    if doc is not None:
                        yield f, i, doc


def where(error):
    return "/".join(str(p) for p in error.absolute_path) or "(document)"


def container_ports(pod_spec):
    names, numbers = set(), set()
    for c in (pod_spec or {}).get("containers", []):
        for port in c.get("ports", []):
            numbers.add(port.get("containerPort"))
            if "name" in port:
                names.add(port["name"])
    return names, numbers


def semantic_errors(docs):
    """Cross-field and cross-object checks, per file: [(file, index, message)]."""
    errors = []
    by_file = {}
    for f, i, d in docs:
        by_file.setdefault(f, []).append((i, d))
    for f, items in by_file.items():
        deployments = {d["metadata"]["name"]: d for _, d in items if d.get("kind") == "Deployment"}
        for i, d in items:
            kind, meta = d.get("kind"), d.get("metadata", {})
            err = lambda m: errors.append((f, i, f"{kind} {meta.get('name')}: {m}"))
            name = meta.get("name", "")
            if "{{" not in name and not DNS_LABEL.match(name):
                err(f"metadata.name '{name}' is not a DNS label")
            pod = None
            if kind == "Deployment":
                sel = d["spec"]["selector"].get("matchLabels", {})
                labels = d["spec"]["template"].get("metadata", {}).get("labels", {})
                if not sel or any(labels.get(k) != v for k, v in sel.items()):
                    err("spec.selector.matchLabels does not match spec.template.metadata.labels")
                pod = d["spec"]["template"]["spec"]
            elif kind == "ClusterServingRuntime":
                pod = d["spec"]
                bad = set(d["spec"].get("protocolVersions", [])) - KSERVE_PROTOCOLS
                if bad:
                    err(f"spec.protocolVersions {sorted(bad)} are not KServe protocols {sorted(KSERVE_PROTOCOLS)}")
            elif kind == "Service":
                sel = d["spec"].get("selector", {})
                targets = [dep for dep in deployments.values()
                           if all(dep["spec"]["template"]["metadata"].get("labels", {}).get(k) == v
                                  for k, v in sel.items())]
                if deployments and not targets:
                    err(f"spec.selector {sel} selects no Deployment's pods in {f}")
                for t in targets:
                    names, numbers = container_ports(t["spec"]["template"]["spec"])
                    for p in d["spec"].get("ports", []):
                        tp = p.get("targetPort", p.get("port"))
                        if tp not in names and tp not in numbers:
                            err(f"port {p.get('name')}: targetPort {tp} is no container port of {t['metadata']['name']}")
            elif kind == "HorizontalPodAutoscaler":
                ref = d["spec"]["scaleTargetRef"]
                if ref.get("kind") == "Deployment" and deployments and ref.get("name") not in deployments:
                    err(f"spec.scaleTargetRef names Deployment {ref.get('name')}, not in {f}")
                if d["spec"].get("minReplicas", 1) > d["spec"]["maxReplicas"]:
                    err("spec.minReplicas > spec.maxReplicas")
            if pod:
                names, numbers = container_ports(pod)
                for c in pod.get("containers", []):
                    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
                        for how in ("httpGet", "tcpSocket", "grpc"):
                            port = c.get(probe, {}).get(how, {}).get("port")
                            if port is not None and port not in names and port not in numbers and numbers:
                                err(f"container {c.get('name')}: {probe}.{how}.port {port} is no container port")
                    for port in c.get("ports", []):
                        if len(port.get("name", "")) > 15:
                            err(f"container {c.get('name')}: port name '{port['name']}' is longer than 15")
    return errors


def main(argv):
    expect_invalid = "--expect-invalid" in argv
    paths = [a for a in argv if a != "--expect-invalid"]
    if not paths:
        sys.exit(__doc__)
    schemas = load_schemas()
    docs = list(documents(paths))
    if not docs:
        print("FAIL: no YAML documents in " + " ".join(paths))
        return 1
    errors = []
    valid_docs = []
    for f, i, d in docs:
        key = (d.get("apiVersion"), d.get("kind")) if isinstance(d, dict) else (None, None)
        if key not in schemas:
            errors.append((f, i, f"no schema for apiVersion {key[0]} kind {key[1]}"))
            continue
        found = sorted(jsonschema.Draft4Validator(schemas[key]).iter_errors(d), key=lambda e: list(e.absolute_path))
        for e in found:
            errors.append((f, i, f"{key[1]} {d.get('metadata', {}).get('name')}: {where(e)}: {e.message}"))
        if not found:
            valid_docs.append((f, i, d))
    errors += semantic_errors(valid_docs)
    files = sorted({f for f, _, _ in docs})
    bad_files = sorted({f for f, _, _ in errors})
    for f, i, m in errors:
        print(f"{'refused' if expect_invalid else 'INVALID'}: {f} [document {i}]: {m}")
    print(f"{len(docs)} documents in {len(files)} files; {len(errors)} errors")
    if expect_invalid:
        missed = [f for f in files if f not in bad_files]
        for f in missed:
            print(f"FAIL: {f} was expected to be refused but validated")
        return 1 if missed else 0
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
