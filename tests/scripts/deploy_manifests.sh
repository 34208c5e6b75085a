#!/usr/bin/env bash
# deploy/ against the real schemas (tests/fixtures/k8s: Kubernetes 1.34's OpenAPI definitions, KServe
# v0.20.0's CRDs; tests/deploy/validate_manifests.py, strict like kubeconform -strict, with Debian's
# python3-jsonschema): the KServe ClusterServingRuntime and InferenceService, the plain Deployment +
# Service + HPA + PDB, and the Helm chart rendered by Helm itself (setup.sh installs it) with its defaults
# and with the values a user changes (tests/deploy/values-*.yaml), each checked to reach the output.
# Known-bad manifests (tests/deploy/invalid) must be refused, so the validator is shown to catch errors.
# Usage: deploy_manifests.sh BUILD_DIR   (run from the source dir)
set -uo pipefail
ROOT=$(pwd)
DEPS=${GANTRY_DEPS_DIR:-$ROOT/.cache}
HELM=${GANTRY_HELM:-$DEPS/helm/helm}
VALIDATE="python3 tests/deploy/validate_manifests.py"

python3 -c 'import jsonschema, yaml' 2>/dev/null ||
  { echo "FAIL: python3-jsonschema or python3-yaml missing (scripts/apt-packages.txt)"; exit 1; }
[[ -x "$HELM" ]] || { echo "FAIL: $HELM missing (scripts/setup.sh installs Helm from scripts/deps.lock)"; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; status=1; fi; }

echo "--- deploy/kserve, deploy/kubernetes"
check "the static manifests validate" '$VALIDATE deploy/kserve deploy/kubernetes'

echo "--- tests/deploy/invalid (each must be refused)"
check "every known-bad manifest is refused" '$VALIDATE --expect-invalid tests/deploy/invalid'

echo "--- Helm $("$HELM" version --short 2>/dev/null)"
check "helm lint deploy/helm/gantry" '"$HELM" lint deploy/helm/gantry >"$tmp/lint.txt" 2>&1 || { cat "$tmp/lint.txt"; false; }'
render() {  # render NAME [helm args...]
  local name=$1; shift
  "$HELM" template gantry deploy/helm/gantry "$@" >"$tmp/$name.yaml" 2>"$tmp/$name.err" ||
    { cat "$tmp/$name.err"; return 1; }
  $VALIDATE "$tmp/$name.yaml"
}
# kinds NAME: the kinds rendered, sorted, one line.
kinds() { python3 -c 'import sys, yaml; print(" ".join(sorted(d["kind"] for d in yaml.safe_load_all(open(sys.argv[1])) if d)))' "$tmp/$1.yaml"; }
# query NAME KIND EXPR: a Python expression over the document `d` of that kind.
query() {
  python3 -c 'import sys, yaml
d = next(d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] == sys.argv[2])
print(eval(sys.argv[3]))' "$tmp/$1.yaml" "$2" "$3"
}
args_of() { query "$1" Deployment '" ".join(d["spec"]["template"]["spec"]["containers"][0]["args"])'; }

check "defaults render and validate" 'render default'
check "defaults: Deployment, HPA, PDB, Service" '[[ "$(kinds default)" == "Deployment HorizontalPodAutoscaler PodDisruptionBudget Service" ]]'
check "defaults: gRPC on the HTTP port, API keys from the Secret, drain 5 + 40 in a 60 s grace period" \
  '[[ "$(args_of default)" == *"--grpc-port=same"*"--api-key-file=/etc/gantry/keys/api-keys.txt"* &&
     "$(args_of default)" == *"--drain-delay=5 --drain-timeout=40"* &&
     "$(query default Deployment "d[\"spec\"][\"template\"][\"spec\"][\"terminationGracePeriodSeconds\"]")" == 60 ]]'
check "defaults: non-root, read-only root filesystem, /tmp the one writable volume" \
  '[[ "$(query default Deployment "d[\"spec\"][\"template\"][\"spec\"][\"containers\"][0][\"securityContext\"][\"readOnlyRootFilesystem\"]")" == True &&
     "$(query default Deployment "d[\"spec\"][\"template\"][\"spec\"][\"securityContext\"][\"runAsNonRoot\"]")" == True ]]'

check "values-deployment.yaml renders and validates" 'render deployment -f tests/deploy/values-deployment.yaml'
check "values-deployment: image, pull secret, its own gRPC port in pod and Service" \
  '[[ "$(query deployment Deployment "d[\"spec\"][\"template\"][\"spec\"][\"containers\"][0][\"image\"]")" == registry.internal/ml/gantry:0.1.0-rc1 &&
     "$(query deployment Deployment "d[\"spec\"][\"template\"][\"spec\"][\"imagePullSecrets\"][0][\"name\"]")" == registry-pull &&
     "$(query deployment Service "[p[\"port\"] for p in d[\"spec\"][\"ports\"]]")" == "[8080, 8001]" &&
     "$(args_of deployment)" == *"--grpc-port=8001"*"--parallel=8 --ctx=4096"* ]]'
check "values-deployment: hostPath models, GPU limit, in-flight scaling only (cpu 0 leaves it out), 3..12" \
  '[[ "$(query deployment Deployment "d[\"spec\"][\"template\"][\"spec\"][\"volumes\"][0][\"hostPath\"][\"path\"]")" == /srv/models &&
     "$(query deployment Deployment "d[\"spec\"][\"template\"][\"spec\"][\"containers\"][0][\"resources\"][\"limits\"][\"nvidia.com/gpu\"]")" == 1 &&
     "$(query deployment HorizontalPodAutoscaler "\" \".join(m[\"type\"] for m in d[\"spec\"][\"metrics\"])")" == Pods &&
     "$(query deployment HorizontalPodAutoscaler "(d[\"spec\"][\"minReplicas\"], d[\"spec\"][\"maxReplicas\"])")" == "(3, 12)" &&
     "$(query deployment Deployment "d[\"spec\"][\"template\"][\"spec\"][\"terminationGracePeriodSeconds\"]")" == 85 ]]'

check "values-fixed.yaml renders and validates" 'render fixed -f tests/deploy/values-fixed.yaml'
check "values-fixed: 3 replicas, no HPA or PDB, no gRPC, a LoadBalancer" \
  '[[ "$(kinds fixed)" == "Deployment Service" && "$(query fixed Deployment "d[\"spec\"][\"replicas\"]")" == 3 &&
     "$(args_of fixed)" == *"--grpc-port=-1"* && "$(query fixed Service "d[\"spec\"][\"type\"]")" == LoadBalancer ]]'

check "values-kserve.yaml renders and validates" 'render kserve -f tests/deploy/values-kserve.yaml'
check "values-kserve: the runtime and an InferenceService using it" \
  '[[ "$(kinds kserve)" == "ClusterServingRuntime InferenceService" &&
     "$(query kserve InferenceService "d[\"spec\"][\"predictor\"][\"model\"][\"runtime\"]")" == gantry-runtime &&
     "$(query kserve ClusterServingRuntime "d[\"spec\"][\"containers\"][0][\"args\"][0]")" == "--model-name={{.Name}}" &&
     "$(query kserve ClusterServingRuntime "\" \".join(f[\"name\"] + \"=\" + str(f[\"priority\"]) for f in d[\"spec\"][\"supportedModelFormats\"])")" == "gguf=2 onnx=1" ]]'

check "no API key and no insecureNoAuth: helm refuses, naming the values" \
  '! "$HELM" template gantry deploy/helm/gantry --set server.apiKeySecret= >/dev/null 2>"$tmp/nokey.err" &&
   grep -q "server.apiKeySecret" "$tmp/nokey.err"'

if ((status)); then echo "FAIL: deploy manifests"; else echo "deploy manifests: all checks passed"; fi
exit $status
