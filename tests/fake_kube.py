"""A loopback stand-in for a Kubernetes API server: /version, nodes with conditions, namespaces, pods with
statuses (paginated with limit/continue, as the real server does), component statuses; scriptable failures
(401, 403, 500 and hangs, per path prefix) and optional TLS with a self-signed certificate.

    with FakeKube(token="t0k", pods=10_000) as kube:
        kube.url            # http://127.0.0.1:<port>  (https:// with tls=True; kube.ca_pem is its CA)
        kube.fail["/api/v1/pods"] = 403   # or "hang"; kube.fail.clear() to heal
"""
from __future__ import annotations

import datetime as dt
import json
import ssl
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

VERSION = {"major": "1", "minor": "29", "gitVersion": "v1.29.2", "platform": "linux/amd64", "goVersion": "go1.21.7"}


def node(name: str, *, ready: bool = True, roles: tuple[str, ...] = (), pressure: str | None = None) -> dict[str, Any]:
    conditions = [{"type": "Ready", "status": "True" if ready else "False", "reason": "KubeletReady" if ready else "KubeletNotReady", "message": ""}]
    for kind in ("MemoryPressure", "DiskPressure", "PIDPressure"):
        conditions.append({"type": kind, "status": "True" if pressure == kind else "False"})
    labels = {"kubernetes.io/hostname": name, **{f"node-role.kubernetes.io/{r}": "" for r in roles}}
    return {
        "metadata": {"name": name, "labels": labels},
        "status": {"conditions": conditions, "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
    }


def pod(name: str, namespace: str = "default", *, phase: str = "Running", waiting: str | None = None, restarts: int = 0) -> dict[str, Any]:
    state = {"waiting": {"reason": waiting}} if waiting else {"running": {"startedAt": "2026-11-24T10:00:00Z"}}
    return {
        "metadata": {"name": name, "namespace": namespace},
        "status": {"phase": phase, "containerStatuses": [{"name": "app", "ready": phase == "Running" and not waiting, "restartCount": restarts, "state": state}]},
    }


def healthy_cluster(n_pods: int = 6) -> dict[str, Any]:
    return {
        "nodes": [node("cp-1", roles=("control-plane",)), node("w-1"), node("w-2")],
        "namespaces": [{"metadata": {"name": n}} for n in ("default", "kube-system", "monitoring")],
        "pods": [pod(f"app-{i}", ("default", "kube-system", "monitoring")[i % 3]) for i in range(n_pods)],
        "components": [{"metadata": {"name": "etcd-0"}, "conditions": [{"type": "Healthy", "status": "True"}]}],
    }


def degrade(cluster: dict[str, Any]) -> dict[str, Any]:
    """One node NotReady, one under disk pressure, three bad pods, an unhealthy scheduler."""
    cluster["nodes"][2] = node("w-2", ready=False)
    cluster["nodes"][1] = node("w-1", pressure="DiskPressure")
    cluster["pods"] += [
        pod("web-7", "shop", waiting="CrashLoopBackOff", restarts=12),
        pod("batch-1", "jobs", phase="Pending"),
        pod("flaky-2", "shop", restarts=9),
        pod("done-1", "jobs", phase="Succeeded"),
    ]
    cluster["components"].append({"metadata": {"name": "scheduler"}, "conditions": [{"type": "Healthy", "status": "False", "message": "connection refused"}]})
    return cluster


def _self_signed(directory: Path) -> tuple[Path, Path, str]:
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fake-kube")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(hours=1)).not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    pem = cert.public_bytes(serialization.Encoding.PEM).decode()
    cert_file, key_file = directory / "cert.pem", directory / "key.pem"
    cert_file.write_text(pem)
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return cert_file, key_file, pem


class FakeKube:
    def __init__(self, token: str = "fake-token", cluster: dict[str, Any] | None = None, *, pods: int | None = None, tls: bool = False):
        self.token = token
        self.cluster = cluster or healthy_cluster()
        if pods is not None:
            self.cluster["pods"] = [pod(f"p-{i}", f"ns-{i % 50}") for i in range(pods)]
        self.fail: dict[str, int | str] = {}  # path prefix -> HTTP status or "hang"
        self.requests: list[tuple[str, str, str]] = []  # (method, path, authorization header)
        self._release = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _send(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # noqa: N802
                url = urlparse(self.path)
                url = url._replace(path=url.path.rstrip("/") or "/")  # the client asks for /version/
                outer.requests.append(("GET", url.path, self.headers.get("Authorization", "")))
                for prefix, what in list(outer.fail.items()):
                    if url.path.startswith(prefix):
                        if what == "hang":
                            outer._release.wait(60)
                            return
                        return self._send(int(what), {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": what, "reason": "Injected"})
                if self.headers.get("Authorization") != f"Bearer {outer.token}":
                    return self._send(401, {"kind": "Status", "status": "Failure", "reason": "Unauthorized", "code": 401})
                if url.path == "/version":
                    return self._send(200, VERSION)
                lists = {"/api/v1/nodes": ("NodeList", "nodes"), "/api/v1/namespaces": ("NamespaceList", "namespaces"),
                         "/api/v1/pods": ("PodList", "pods"), "/api/v1/componentstatuses": ("ComponentStatusList", "components")}
                if url.path not in lists:
                    return self._send(404, {"kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404})
                kind, key = lists[url.path]
                items = outer.cluster[key]
                q = parse_qs(url.query)
                start = int(q.get("continue", ["0"])[0] or 0)
                limit = int(q.get("limit", ["0"])[0] or 0) or len(items)
                page = items[start : start + limit]
                meta: dict[str, Any] = {"resourceVersion": "1"}
                if start + limit < len(items):
                    meta["continue"] = str(start + limit)
                return self._send(200, {"kind": kind, "apiVersion": "v1", "metadata": meta, "items": page})

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.ca_pem: str | None = None
        if tls:
            self._dir = tempfile.TemporaryDirectory()
            cert, key, self.ca_pem = _self_signed(Path(self._dir.name))
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(cert, key)
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeKube:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._release.set()
        self.server.shutdown()
        self.server.server_close()
