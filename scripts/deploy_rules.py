#!/usr/bin/python3
"""whisperd's own rules for deploy/k8s, beyond the schemas (check-deploy.sh).

Usage: deploy_rules.py DEPLOY_DIR RENDERED_DIR
RENDERED_DIR holds one kustomize rendering per overlay. The rules tie the
manifests to the sources, so that renaming a metric, a route or an option
breaks this check instead of a cluster:
  - probe paths are routes of api/route.c; readiness is /ready, liveness /health;
  - metric names (HPA, Prometheus adapter rule) are metrics of api/metrics.c;
  - WHISPERD_* variables are options of daemon/config.c;
  - Service, PDB and HPA point at the Deployment and its pod labels;
  - terminationGracePeriodSeconds >= preStop sleep + WHISPERD_SHUTDOWN_GRACE + 5
    (the daemon's last 5 s for answers in flight, daemon/cmd_serve.c);
  - the container requests CPU and memory; a GPU overlay limits nvidia.com/gpu.
Exit 1 with one line per broken rule.
"""
import glob
import os
import re
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
errors = []


def err(where, msg):
    errors.append("%s: %s" % (where, msg))


def source(path):
    with open(os.path.join(ROOT, path)) as f:
        return f.read()


ROUTES = set(re.findall(r'\{ "(/[a-z0-9/_]*)", WD_ROUTE_', source("api/route.c")))
# gauge(o, "queue_depth", ...), counter(...), family(o, "jobs_total", ...)
METRICS = {"whisperd_" + m for m in
           re.findall(r'(?:gauge|counter|family)\(&?o, "([a-z_]+)"', source("api/metrics.c"))}
OPTIONS = {"WHISPERD_" + k.upper().replace("-", "_") for k in
           re.findall(r'^\s*\{ "([a-z][a-z0-9-]*)", (?:\'.\'|0), WD_OPT_', source("daemon/config.c"),
                      re.M)} | {"WHISPERD_CONFIG"}
for name, found in (("routes in api/route.c", ROUTES), ("metrics in api/metrics.c", METRICS),
                    ("options in daemon/config.c", OPTIONS)):
    if len(found) < 3:
        sys.exit("deploy_rules: found no %s: the source patterns changed" % name)


def env_value(container, name):
    for e in container.get("env", []):
        if e["name"] == name:
            return e.get("value")
    return None


def check_rendering(path):
    where = os.path.basename(path)
    docs = [d for d in yaml.safe_load_all(open(path)) if d]
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d["kind"], []).append(d)
    deps = by_kind.get("Deployment", [])
    if len(deps) != 1:
        return err(where, "expected one Deployment, found %d" % len(deps))
    dep = deps[0]
    pod = dep["spec"]["template"]
    labels = pod["metadata"].get("labels", {})
    sel = dep["spec"]["selector"]["matchLabels"]
    if any(labels.get(k) != v for k, v in sel.items()):
        err(where, "the Deployment's selector %s does not match its pod labels" % sel)
    c = pod["spec"]["containers"][0]

    # Probes.
    for probe, want in (("readinessProbe", "/ready"), ("livenessProbe", "/health")):
        p = c.get(probe, {}).get("httpGet", {}).get("path")
        if p not in ROUTES:
            err(where, "%s path %r is no route of api/route.c (%s)" % (probe, p, sorted(ROUTES)))
        elif p != want:
            err(where, "%s should probe %s, not %s" % (probe, want, p))

    # Environment = options.
    for e in c.get("env", []):
        if e["name"].startswith("WHISPERD_") and e["name"] not in OPTIONS:
            err(where, "%s is no option of daemon/config.c" % e["name"])

    # The grace period covers the drain.
    grace = pod["spec"].get("terminationGracePeriodSeconds", 30)
    pre = c.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
    pre_s = int(pre[1]) if len(pre) == 2 and pre[0] == "sleep" else 0
    drain = int(env_value(c, "WHISPERD_SHUTDOWN_GRACE") or 30)
    if grace < pre_s + drain + 5:
        err(where, "terminationGracePeriodSeconds %d < preStop %d + shutdown grace %d + 5"
            % (grace, pre_s, drain))

    # Resources.
    req = c.get("resources", {}).get("requests", {})
    if "cpu" not in req or "memory" not in req:
        err(where, "the container requests no cpu or memory")
    if "gpu" in where and "nvidia.com/gpu" not in c.get("resources", {}).get("limits", {}):
        err(where, "a GPU overlay without an nvidia.com/gpu limit")

    # Service, PDB, ServiceMonitor select the pods; the HPA scales the Deployment.
    for kind, get in (("Service", lambda d: d["spec"]["selector"]),
                      ("PodDisruptionBudget", lambda d: d["spec"]["selector"]["matchLabels"]),
                      ("ServiceMonitor", None)):
        for d in by_kind.get(kind, []):
            if kind == "ServiceMonitor":
                svc_labels = by_kind["Service"][0]["metadata"].get("labels", {})
                s = d["spec"]["selector"]["matchLabels"]
                if any(svc_labels.get(k) != v for k, v in s.items()):
                    err(where, "the ServiceMonitor selects no Service (%s)" % s)
                ports = {p["name"] for p in by_kind["Service"][0]["spec"]["ports"]}
                for ep in d["spec"]["endpoints"]:
                    if ep.get("port") not in ports or ep.get("path") not in ROUTES:
                        err(where, "ServiceMonitor endpoint %s is not a Service port + route" % ep)
                continue
            s = get(d)
            if any(labels.get(k) != v for k, v in s.items()):
                err(where, "the %s selects no whisperd pod (%s)" % (kind, s))
    for hpa in by_kind.get("HorizontalPodAutoscaler", []):
        ref = hpa["spec"]["scaleTargetRef"]
        if ref["kind"] != "Deployment" or ref["name"] != dep["metadata"]["name"]:
            err(where, "the HPA scales %s/%s, not the Deployment" % (ref["kind"], ref["name"]))
        for m in hpa["spec"].get("metrics", []):
            if m["type"] in ("Pods", "Object", "External"):
                name = m[m["type"].lower()]["metric"]["name"]
                if name not in METRICS:
                    err(where, "the HPA metric %s is not in api/metrics.c" % name)


def check_adapter(path):
    where = os.path.relpath(path, ROOT)
    values = yaml.safe_load(open(path))
    for r in values["rules"]["custom"]:
        for name in re.findall(r"whisperd_[a-z_]+", r["seriesQuery"] + r["name"]["as"]):
            if name not in METRICS:
                err(where, "%s is not in api/metrics.c" % name)


def main():
    deploy, rendered = sys.argv[1], sys.argv[2]
    files = sorted(glob.glob(os.path.join(rendered, "*.yaml")))
    if not files:
        sys.exit("deploy_rules: no renderings in %s" % rendered)
    for f in files:
        check_rendering(f)
    check_adapter(os.path.join(deploy, "k8s", "prometheus-adapter-values.yaml"))
    for e in errors:
        print("deploy_rules: " + e)
    if errors:
        sys.exit(1)
    print("deploy_rules: %d renderings follow the rules" % len(files))


if __name__ == "__main__":
    main()
