"""Every overlay renders with kustomize, validates strictly against the Kubernetes schemas, and meets the policies."""
from __future__ import annotations

import copy
import os

import kubernetes_validate
import pytest

from .conftest import K8S, OVERLAYS, ROOT, render
from .policy import GPU_SERVICES, WORKLOADS, gpu_violations, workload_violations

K8S_VERSION = "1.33.0"


def by_kind(docs: list[dict], kind: str) -> dict[str, dict]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def test_there_are_dev_and_prod_overlays():
    assert {"dev", "prod"} <= set(OVERLAYS)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_validates_strictly(rendered, overlay):
    docs = rendered[overlay]
    assert docs, f"{overlay} renders nothing"
    for doc in docs:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_strict_validation_rejects_an_unknown_field(rendered):
    doc = copy.deepcopy(by_kind(rendered["dev"], "Deployment")["security"])
    doc["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_workload_is_non_root_read_only_bounded_and_probed(rendered, overlay):
    workloads = [d for d in rendered[overlay] if d["kind"] in WORKLOADS]
    assert workloads
    violations = [v for d in workloads for v in workload_violations(d)]
    assert violations == []


def test_policy_check_catches_a_root_unbounded_container(rendered):
    doc = copy.deepcopy(by_kind(rendered["dev"], "Deployment")["tools"])
    c = doc["spec"]["template"]["spec"]["containers"][0]
    del c["resources"]["limits"], c["readinessProbe"]
    c["securityContext"] = {"runAsUser": 0}
    doc["spec"]["template"]["spec"]["securityContext"] = {}
    found = "\n".join(workload_violations(doc))
    for expected in ("may run as root", "no cpu limit", "no readinessProbe", "writable root filesystem"):
        assert expected in found


def test_every_service_in_the_tree_has_a_deployment(rendered):
    services = {p.name for p in (ROOT / "services").iterdir() if (p / "pyproject.toml").exists()}
    for overlay, docs in rendered.items():
        assert services <= set(by_kind(docs, "Deployment")), overlay
        assert "llm" in by_kind(docs, "Deployment"), overlay


def test_prod_puts_classifiers_and_llm_on_gpu_nodes(rendered):
    deployments = by_kind(rendered["prod"], "Deployment")
    assert [v for name in GPU_SERVICES for v in gpu_violations(deployments[name])] == []
    for name in ("supervisor", "tools", "memory"):
        assert gpu_violations(deployments[name]), f"{name} should not be on GPU nodes"
    # each GPU workload is told to use the GPU by the setting it reads, and only by that one
    env = {name: {e["name"]: e.get("value") for e in deployments[name]["spec"]["template"]["spec"]["containers"][0].get("env", [])}
           for name in GPU_SERVICES}
    for name in ("security", "intent"):
        assert env[name].get("MESHWARD_CLASSIFIER_DEVICE") == "cuda" and "MESHWARD_LLM_DEVICE" not in env[name], name
    assert env["llm"].get("MESHWARD_LLM_DEVICE") == "cuda" and "MESHWARD_CLASSIFIER_DEVICE" not in env["llm"]


def test_dev_runs_on_cpu(rendered):
    deployments = by_kind(rendered["dev"], "Deployment")
    for name in GPU_SERVICES:
        assert len(gpu_violations(deployments[name])) == 4


def test_nats_is_a_three_node_jetstream_cluster(rendered):
    for overlay, docs in rendered.items():
        nats = by_kind(docs, "StatefulSet")["nats"]
        assert nats["spec"]["replicas"] == 3, overlay
        config = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].startswith("nats-config"))
        conf = config["data"]["nats.conf"]
        assert "jetstream" in conf and conf.count("nats-headless:6222") == 3
        volumes = {v["name"]: v for v in nats["spec"]["template"]["spec"]["volumes"]}
        assert volumes["auth"]["secret"]["secretName"].startswith("nats-auth")


def test_network_policies_expose_only_the_supervisor(rendered):
    policies = by_kind(rendered["prod"], "NetworkPolicy")
    assert policies["default-deny"]["spec"]["podSelector"] == {}
    assert set(policies["default-deny"]["spec"]["policyTypes"]) == {"Ingress", "Egress"}
    open_to_all = [
        name for name, p in policies.items()
        for rule in p["spec"].get("ingress", []) if "from" not in rule
    ]
    assert open_to_all == ["supervisor-ingress"]
    egress = policies["clients-egress-nats"]["spec"]["egress"]
    assert egress[0]["to"][0]["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "nats"}


def test_prod_has_autoscaling_and_disruption_budgets(rendered):
    docs = rendered["prod"]
    hpas = by_kind(docs, "HorizontalPodAutoscaler")
    pdbs = by_kind(docs, "PodDisruptionBudget")
    deployments = by_kind(docs, "Deployment")
    assert set(hpas) == set(deployments) - {"memory"}  # one durable consumer: not scaled on CPU
    assert set(pdbs) == set(deployments) | {"nats"}
    for hpa in hpas.values():
        assert hpa["spec"]["scaleTargetRef"]["name"] in deployments


def test_memory_takes_postgres_from_a_secret(rendered):
    for docs in rendered.values():
        memory = by_kind(docs, "Deployment")["memory"]
        env = {e["name"]: e for e in memory["spec"]["template"]["spec"]["containers"][0].get("env", [])}
        assert env["MESHWARD_DATABASE_URL"]["valueFrom"]["secretKeyRef"]["name"] == "meshward-postgres"


@pytest.mark.parametrize("component", sorted(p.name for p in (K8S / "components").iterdir()))
def test_each_component_renders_on_the_base(tmp_path, component):
    base, comp = (os.path.relpath(K8S / p, tmp_path) for p in ("base", f"components/{component}"))
    (tmp_path / "kustomization.yaml").write_text(f"resources: [{base}]\ncomponents: [{comp}]\n")
    assert render(tmp_path)


def test_closed_bus_gives_each_service_its_own_user_and_password_only(tmp_path):
    base, comp = (os.path.relpath(K8S / p, tmp_path) for p in ("base", "components/closed-bus"))
    (tmp_path / "kustomization.yaml").write_text(f"resources: [{base}]\ncomponents: [{comp}]\n")
    deployments = by_kind(render(tmp_path), "Deployment")
    for name, d in deployments.items():
        pod = d["spec"]["template"]["spec"]
        env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
        assert env["MESHWARD_NATS_USER"] == name
        assert env["MESHWARD_NATS_PASSWORD_FILE"] == f"/run/secrets/meshward/nats/{name}.password"
        secret = next(v["secret"] for v in pod["volumes"] if v["name"] == "nats-credentials")
        assert secret["optional"] is False
        assert [i["key"] for i in secret["items"]] == [f"{name}.password"]
