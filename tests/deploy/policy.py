"""Policies every rendered workload must meet; each check returns the violations it found (empty: compliant)."""
from __future__ import annotations

WORKLOADS = ("Deployment", "StatefulSet", "DaemonSet", "Job")
GPU_SERVICES = ("security", "intent", "llm")


def containers(doc: dict) -> list[dict]:
    spec = doc["spec"]["template"]["spec"]
    return spec.get("containers", []) + spec.get("initContainers", [])


def workload_violations(doc: dict) -> list[str]:
    name = f"{doc['kind']}/{doc['metadata']['name']}"
    pod = doc["spec"]["template"]["spec"]
    pod_sc = pod.get("securityContext", {})
    found = []
    if pod.get("automountServiceAccountToken") is not False:
        found.append(f"{name}: mounts a service account token")
    for c in pod.get("containers", []):
        where = f"{name}/{c['name']}"
        sc = c.get("securityContext", {})
        if not (sc.get("runAsNonRoot") or pod_sc.get("runAsNonRoot")):
            found.append(f"{where}: may run as root")
        if sc.get("runAsUser", pod_sc.get("runAsUser")) in (None, 0):
            found.append(f"{where}: no non-zero runAsUser")
        if sc.get("readOnlyRootFilesystem") is not True:
            found.append(f"{where}: writable root filesystem")
        if sc.get("allowPrivilegeEscalation") is not False:
            found.append(f"{where}: privilege escalation allowed")
        if "ALL" not in sc.get("capabilities", {}).get("drop", []):
            found.append(f"{where}: capabilities not dropped")
        limits = c.get("resources", {}).get("limits", {})
        requests = c.get("resources", {}).get("requests", {})
        for key in ("cpu", "memory"):
            if key not in limits:
                found.append(f"{where}: no {key} limit")
            if key not in requests:
                found.append(f"{where}: no {key} request")
        for probe in ("livenessProbe", "readinessProbe"):
            if probe not in c:
                found.append(f"{where}: no {probe}")
    return found


def gpu_violations(doc: dict) -> list[str]:
    """A GPU-node workload: the -gpu image, a GPU limit, a GPU node selector and the GPU taint tolerated."""
    name = doc["metadata"]["name"]
    pod = doc["spec"]["template"]["spec"]
    found = []
    c = pod["containers"][0]
    if "-gpu" not in c["image"].rsplit("/", 1)[-1]:
        found.append(f"{name}: image {c['image']} is not a GPU image")
    if str(c.get("resources", {}).get("limits", {}).get("nvidia.com/gpu")) != "1":
        found.append(f"{name}: no nvidia.com/gpu limit")
    if pod.get("nodeSelector", {}).get("nvidia.com/gpu.present") != "true":
        found.append(f"{name}: not pinned to GPU nodes")
    if not any(t.get("key") == "nvidia.com/gpu" for t in pod.get("tolerations", [])):
        found.append(f"{name}: does not tolerate the GPU taint")
    return found
