"""The cluster tools (cluster_register, cluster_list, cluster_info, cluster_health, cluster_remove) and the
optional periodic health check. Transport-free: events go out through the `emit` callable the service sets.

Credentials are sealed before they reach the store, opened only to build a `kube.Target`, and appear in no
reply, log line, span or event. Registration and removal are marked `requires_approval` (so the MCP door
refuses them): on the bus they answer needs_approval until a human approves the call through the supervisor,
unless an operator gave a standing approval with MESHWARD_CLUSTER_WRITE=allow.
"""
from __future__ import annotations

import asyncio
import base64
import binascii
import ipaddress
import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import yaml
from meshward.contracts import ClusterAudit, ClusterHealthChecked, DataContent, ErrorCode, Event, TextContent, subjects
from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from ..registry import Tool, ToolError
from . import report
from .crypto import Sealer, SealError
from .kube import KubeError, KubeReader, Target
from .settings import ClusterSettings
from .store import ClusterRow, ClusterStore

log = logging.getLogger(__name__)

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$"
MAX_KUBECONFIG_BYTES = 64 * 1024
MAX_CA_BYTES = 64 * 1024
LOOPBACK_HOSTS = ("localhost",)
# Budget of one tool call (the tools hop's default timeout is 10 s): health answers "unreachable" before it.
TOOL_TIMEOUT_S = 9.5
HEALTH_BUDGET_S = 8.5

Emit = Callable[[str, Event], None]


def _is_loopback(host: str) -> bool:
    if host in LOOPBACK_HOSTS:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_api_url(url: str) -> str:
    """https://host[:port][/path]; plain http only to a loopback address (a bearer token crosses the wire)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise ValueError("api_url is not a valid URL") from None
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ValueError("api_url must be an https:// URL with a host")
    if parts.scheme == "http" and not _is_loopback(parts.hostname):
        raise ValueError("api_url must use https (plain http is accepted for loopback addresses only)")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise ValueError("api_url must not carry credentials, a query or a fragment")
    del port
    return url.rstrip("/")


def _pem(ca: str) -> str:
    if "-----BEGIN CERTIFICATE-----" not in ca:
        raise ValueError("ca_cert must be a PEM certificate (-----BEGIN CERTIFICATE-----)")
    return ca


class ClusterName(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=NAME_PATTERN, description="the registered cluster's name")


class ListArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RegisterArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NAME_PATTERN, description="a short name for the cluster, e.g. prod-eu")
    api_url: str | None = Field(default=None, max_length=2048, description="the Kubernetes API server URL (https://...); taken from the kubeconfig when omitted")
    token: SecretStr | None = Field(default=None, max_length=16_384, description="a bearer token bound to a read-only (get/list) ClusterRole")
    kubeconfig: SecretStr | None = Field(default=None, max_length=MAX_KUBECONFIG_BYTES, description="a kubeconfig (YAML) whose current context uses a token; instead of api_url + token")
    ca_cert: str | None = Field(default=None, max_length=MAX_CA_BYTES, description="PEM CA certificate of the API server; the system trust store when omitted")
    labels: dict[str, str] = Field(default_factory=dict, max_length=32, description="free labels, e.g. {\"env\": \"prod\"}")

    @field_validator("labels")
    @classmethod
    def _labels(cls, v: dict[str, str]) -> dict[str, str]:
        if any(not 0 < len(k) <= 63 or len(val) > 63 for k, val in v.items()):
            raise ValueError("label keys must be 1-63 characters and values at most 63")
        return v

    @field_validator("api_url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        return None if v is None else check_api_url(v)

    @field_validator("ca_cert")
    @classmethod
    def _ca(cls, v: str | None) -> str | None:
        return None if v is None else _pem(v)

    @model_validator(mode="after")
    def _one_credential(self) -> RegisterArgs:
        if (self.token is None) == (self.kubeconfig is None):
            raise ValueError("give exactly one of token or kubeconfig")
        if self.token is not None and self.api_url is None:
            raise ValueError("api_url is required with a token")
        if self.token is not None and not self.token.get_secret_value().strip():
            raise ValueError("token is empty")
        return self


def target_from_kubeconfig(text: str) -> Target:
    """The current context's server, CA and token. Only what can be checked here: `exec` and `auth-provider`
    plugins would run programs, file paths would read this host's files, and skipping TLS checks is refused."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        raise ToolError(ErrorCode.BAD_REQUEST, "kubeconfig is not valid YAML") from None
    if not isinstance(doc, dict):
        raise ToolError(ErrorCode.BAD_REQUEST, "kubeconfig must be a YAML mapping")

    def named(kind: str, name: Any) -> dict[str, Any]:
        for entry in doc.get(kind) or []:
            if isinstance(entry, dict) and entry.get("name") == name and isinstance(entry.get(kind[:-1]), dict):
                return entry[kind[:-1]]
        raise ToolError(ErrorCode.BAD_REQUEST, f"kubeconfig: no {kind[:-1]} named {str(name)[:64]!r}")

    contexts = doc.get("contexts") or []
    current = doc.get("current-context") or (contexts[0].get("name") if contexts and isinstance(contexts[0], dict) else None)
    ctx = named("contexts", current)
    cluster, user = named("clusters", ctx.get("cluster")), named("users", ctx.get("user"))
    unsupported = sorted({"exec", "auth-provider", "tokenFile", "client-certificate", "client-key", "client-certificate-data", "client-key-data", "username", "password"} & set(user))
    if unsupported:
        raise ToolError(ErrorCode.BAD_REQUEST, f"kubeconfig user uses {', '.join(unsupported)}: only a bearer token is supported")
    if cluster.get("insecure-skip-tls-verify"):
        raise ToolError(ErrorCode.BAD_REQUEST, "kubeconfig sets insecure-skip-tls-verify: TLS verification cannot be turned off")
    if "certificate-authority" in cluster:
        raise ToolError(ErrorCode.BAD_REQUEST, "kubeconfig refers to a CA file: embed it as certificate-authority-data")
    token, server = user.get("token"), cluster.get("server")
    if not isinstance(token, str) or not token.strip() or not isinstance(server, str):
        raise ToolError(ErrorCode.BAD_REQUEST, "kubeconfig needs the cluster's server and the user's token")
    ca = None
    if cluster.get("certificate-authority-data"):
        try:
            ca = _pem(base64.b64decode(str(cluster["certificate-authority-data"]), validate=True).decode())
        except (binascii.Error, UnicodeDecodeError, ValueError):
            raise ToolError(ErrorCode.BAD_REQUEST, "kubeconfig certificate-authority-data is not a base64 PEM certificate") from None
    try:
        return Target(check_api_url(server), token.strip(), ca)
    except ValueError as e:
        raise ToolError(ErrorCode.BAD_REQUEST, f"kubeconfig server: {e}") from None


class ClusterDomain:
    """The clusters of this tools service: its store (opened on first use), its key and its event door."""

    def __init__(self, settings: ClusterSettings | None = None, emit: Emit | None = None):
        self.settings = settings or ClusterSettings()
        self.emit: Emit = emit or (lambda _subject, _event: None)
        self._sealer = Sealer(self.settings.secret_key) if self.settings.secret_key is not None else None
        self._store: ClusterStore | None = None
        self._lock = asyncio.Lock()

    async def store(self) -> ClusterStore:
        async with self._lock:
            if self._store is None:
                self._store = await ClusterStore.open(self.settings.database_url)
            return self._store

    async def close(self) -> None:
        if self._store is not None:
            await self._store.close()
            self._store = None

    # -- helpers -------------------------------------------------------------
    def _writable(self, tool: str) -> Sealer:
        # Reached only through the registry's approval gate: a human approved this call, or an operator set
        # MESHWARD_CLUSTER_WRITE=allow (a standing approval).
        if self._sealer is None:
            raise ToolError(ErrorCode.REFUSED, "MESHWARD_SECRET_KEY is not set: cluster credentials cannot be stored encrypted, so none are stored")
        return self._sealer

    async def _row(self, name: str) -> ClusterRow:
        store = await self.store()
        row = await store.get(name)
        if row is None:
            names = await store.names()
            known = ", ".join(names) if names else "none yet (register one with cluster_register)"
            raise ToolError(ErrorCode.NOT_FOUND, f"no cluster named {name!r} is registered; registered clusters: {known}")
        return row

    def _target(self, row: ClusterRow) -> Target:
        if self._sealer is None:
            raise ToolError(ErrorCode.REFUSED, "MESHWARD_SECRET_KEY is not set: the stored cluster credentials cannot be opened")
        try:
            creds = self._sealer.open(row.credentials)
        except SealError as e:
            raise ToolError(ErrorCode.REFUSED, str(e)) from None
        return Target(row.api_url, creds["token"], creds.get("ca_cert"))

    def _reader(self, target: Target) -> KubeReader:
        return KubeReader(target, self.settings)

    # -- tools ---------------------------------------------------------------
    async def register(self, args: RegisterArgs) -> list:
        sealer = self._writable("cluster_register")
        if args.kubeconfig is not None:
            target = target_from_kubeconfig(args.kubeconfig.get_secret_value())
            if args.ca_cert:
                target = Target(target.api_url, target.token, args.ca_cert)
            auth = "kubeconfig"
        else:
            assert args.token is not None and args.api_url is not None  # the model's validator
            target = Target(args.api_url, args.token.get_secret_value().strip(), args.ca_cert)
            auth = "token"
        store = await self.store()
        if await store.get(args.name) is None and await store.count() >= self.settings.max_clusters:
            raise ToolError(ErrorCode.TOO_LARGE, f"{self.settings.max_clusters} clusters are registered already (MESHWARD_CLUSTER_MAX_CLUSTERS)")
        try:
            async with self._reader(target) as k:
                version, _ = await k.version()
        except KubeError as e:
            raise ToolError(e.code, f"cluster {args.name!r} was not registered: {e.message}") from None
        sealed = sealer.seal({"token": target.token, **({"ca_cert": target.ca_cert} if target.ca_cert else {})})
        new = await store.upsert(args.name, target.api_url, auth, sealed, args.labels, report.server_version(version))
        self.emit(subjects.EVENT_CLUSTER_AUDIT, ClusterAudit(action="registered" if new else "updated", cluster=args.name, api_url=target.api_url, auth=auth, labels=args.labels))
        log.info("cluster %s %s (%s)", args.name, "registered" if new else "updated", target.api_url)
        row = await store.get(args.name)
        assert row is not None
        verb = "Registered" if new else "Updated"
        return [
            TextContent(text=f"{verb} cluster {args.name} ({target.api_url}, Kubernetes {row.server_version}). Its credentials are stored encrypted."),
            DataContent(data=row.public()),
        ]

    async def list(self, _: ListArgs) -> list:
        rows = await (await self.store()).all()
        if not rows:
            text = "No clusters are registered yet."
        else:
            text = f"{len(rows)} registered cluster{'s' if len(rows) != 1 else ''}: " + ", ".join(f"{r.name} ({r.api_url})" for r in rows)
        return [TextContent(text=text), DataContent(data={"clusters": [r.public() for r in rows]})]

    async def info(self, args: ClusterName) -> list:
        row = await self._row(args.name)
        try:
            async with self._reader(self._target(row)) as k:
                (version, _), nodes, namespaces = await asyncio.gather(k.version(), k.nodes(), k.namespaces())
        except KubeError as e:
            raise ToolError(e.code, f"cluster {args.name}: {e.message}") from None
        data = report.info(args.name, version, nodes, namespaces, self.settings.max_listed)
        return [TextContent(text=report.info_text(data)), DataContent(data=data)]

    async def check(self, name: str) -> report.Health:
        """The health of one registered cluster: unreachable (with the cause) rather than an error when the
        API cannot be reached in time; 401/403 raise, since they are the operator's to fix."""
        row = await self._row(name)
        target = self._target(row)
        try:
            async with asyncio.timeout(HEALTH_BUDGET_S):
                async with self._reader(target) as k:
                    version, latency = await k.version()
                    nodes, (pods, truncated), components = await asyncio.gather(k.nodes(), k.pods(), k.component_statuses())
        except TimeoutError:
            return report.unreachable(name, f"the API server did not answer within {HEALTH_BUDGET_S:g}s")
        except KubeError as e:
            if e.cause in ("unreachable", "timeout", "tls", "server_error", "bad_response"):
                return report.unreachable(name, e.message)
            raise ToolError(e.code, f"cluster {name}: {e.message}") from None
        return report.health(
            name, version, latency, nodes, pods, truncated, components,
            max_listed=self.settings.max_listed, restart_threshold=self.settings.restart_threshold,
        )

    def _health_event(self, h: report.Health, source: str) -> None:
        self.emit(
            subjects.EVENT_CLUSTER_HEALTH,
            ClusterHealthChecked(cluster=h.cluster, verdict=h.verdict, reasons=[r[:500] for r in h.reasons[:32]], latency_ms=h.latency_ms, source=source),
        )

    async def health(self, args: ClusterName) -> list:
        h = await self.check(args.name)
        self._health_event(h, "question")
        return [TextContent(text=report.health_text(h)), DataContent(data=h.data())]

    async def remove(self, args: ClusterName) -> list:
        self._writable("cluster_remove")
        row = await self._row(args.name)
        if not await (await self.store()).remove(args.name):
            raise ToolError(ErrorCode.NOT_FOUND, f"cluster {args.name!r} was removed meanwhile")
        self.emit(subjects.EVENT_CLUSTER_AUDIT, ClusterAudit(action="removed", cluster=row.name, api_url=row.api_url, auth=row.auth, labels=row.labels))
        log.info("cluster %s removed", row.name)
        return [TextContent(text=f"Removed cluster {row.name}; its stored credentials are deleted."), DataContent(data={"removed": row.name})]

    async def check_all(self) -> list[report.Health]:
        """One round of the periodic check: every registered cluster, one event each."""
        out = []
        for name in await (await self.store()).names():
            try:
                h = await self.check(name)
            except ToolError as e:
                h = report.unreachable(name, e.message)
            self._health_event(h, "scheduled")
            out.append(h)
        return out

    async def run_health_checks(self, interval_s: float) -> None:
        """Until cancelled: a round every `interval_s` (a failing round is logged, the next one runs)."""
        while True:
            try:
                await self.check_all()
            except Exception:  # noqa: BLE001 - a background loop must outlive one bad round
                log.exception("periodic cluster health check failed")
            await asyncio.sleep(interval_s)

    def tools(self) -> list[Tool]:
        return [
            Tool("cluster_register", "Register a Kubernetes cluster (name, API URL and a read-only bearer token, or a kubeconfig); credentials are stored encrypted. Needs approval.", RegisterArgs, self.register, requires_approval=True, preapproved=self.settings.write == "allow", timeout_s=TOOL_TIMEOUT_S),
            Tool("cluster_list", "List the registered Kubernetes clusters (names, API URLs, labels).", ListArgs, self.list, timeout_s=5.0, read_only=True),
            Tool("cluster_info", "A registered cluster's Kubernetes version, nodes and roles, namespaces and capacity.", ClusterName, self.info, timeout_s=TOOL_TIMEOUT_S, read_only=True),
            Tool("cluster_health", "A registered cluster's health: API reachability and latency, node conditions, pods not running or restarting, unhealthy components; verdict healthy / degraded / unreachable with reasons.", ClusterName, self.health, timeout_s=TOOL_TIMEOUT_S, read_only=True),
            Tool("cluster_remove", "Remove a registered cluster and its stored credentials. Needs approval.", ClusterName, self.remove, requires_approval=True, preapproved=self.settings.write == "allow", timeout_s=5.0),
        ]
