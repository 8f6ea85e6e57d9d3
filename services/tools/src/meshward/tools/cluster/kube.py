"""Read-only access to one cluster's Kubernetes API through the official `kubernetes` client.

* Only GET requests (version, nodes, namespaces, pods, component statuses): the RBAC role the README asks an
  operator to grant is get/list, and nothing here could use more.
* Bounded: every request has a (connect, read) timeout; the client's own urllib3 retries are off and this
  module retries, with backoff, only what may pass (connection errors and 5xx), never a read timeout (a hung
  API server would multiply the wait) nor 4xx.
* Paginated: lists use `limit` + `continue`, and pods stop at `max_pods`, so a 10,000-pod cluster costs a
  bounded number of pages. Bodies are read raw (`_preload_content=False`) and parsed as JSON: the generated
  models are not needed for a summary and cost far more per pod.
* The sync client runs in a worker thread; the request timeouts bound how long a thread can outlive a
  cancelled call.
"""
from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any

import urllib3
from meshward.contracts import ErrorCode
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential

from .settings import ClusterSettings


class KubeError(Exception):
    """A typed failure talking to a cluster; `cause` names it for answers (never carries credentials)."""

    def __init__(self, code: ErrorCode, cause: str, message: str, retryable: bool = False):
        super().__init__(message)
        self.code, self.cause, self.message, self.retryable = code, cause, message, retryable


@dataclass(frozen=True)
class Target:
    api_url: str
    token: str
    ca_cert: str | None = None  # PEM; None: the system trust store

    def __repr__(self) -> str:  # never the token, whatever prints this
        return f"Target(api_url={self.api_url!r})"


def _classify(e: BaseException, what: str, settings: ClusterSettings) -> KubeError:
    from kubernetes.client.exceptions import ApiException  # noqa: PLC0415  (loaded with the first KubeReader)

    if isinstance(e, ApiException):
        status = e.status or 0
        if status == 0:  # the client wraps TLS failures as status 0
            reason = str(e.reason or "").splitlines()
            detail = reason[-1][:200] if reason else "TLS handshake failed"
            return KubeError(ErrorCode.REFUSED, "tls", f"TLS verification failed for {what}: {detail}")
        if status == 401:
            return KubeError(ErrorCode.REFUSED, "unauthorized", f"the API server rejected the credentials (401) for {what}: the token is invalid or expired")
        if status == 403:
            return KubeError(ErrorCode.REFUSED, "forbidden", f"RBAC forbids {what} (403): grant the read-only ClusterRole (get/list) to this token")
        if status == 404:
            return KubeError(ErrorCode.NOT_FOUND, "not_found", f"the API server has no {what} (404)")
        if status >= 500:
            return KubeError(ErrorCode.UNAVAILABLE, "server_error", f"the API server failed on {what} (HTTP {status})", retryable=True)
        return KubeError(ErrorCode.UNAVAILABLE, "bad_response", f"unexpected HTTP {status} on {what}")
    if isinstance(e, urllib3.exceptions.SSLError):
        return KubeError(ErrorCode.REFUSED, "tls", f"TLS verification failed for {what}")
    if isinstance(e, urllib3.exceptions.ReadTimeoutError):
        return KubeError(ErrorCode.DEADLINE_EXCEEDED, "timeout", f"the API server did not answer {what} within {settings.read_timeout_s:g}s")
    if isinstance(e, urllib3.exceptions.NewConnectionError | urllib3.exceptions.ConnectTimeoutError | urllib3.exceptions.ProtocolError):
        return KubeError(ErrorCode.UNAVAILABLE, "unreachable", f"the API server is unreachable ({type(e).__name__}) for {what}", retryable=True)
    if isinstance(e, ValueError | urllib3.exceptions.LocationValueError):
        return KubeError(ErrorCode.UNAVAILABLE, "bad_response", f"the API server's answer to {what} is not valid JSON")
    if isinstance(e, urllib3.exceptions.HTTPError):
        return KubeError(ErrorCode.UNAVAILABLE, "unreachable", f"connection to the API server failed ({type(e).__name__}) for {what}", retryable=True)
    raise e


class KubeReader:
    """GET-only views of one cluster. Use as `async with KubeReader(target, settings) as k: await k.version()`."""

    def __init__(self, target: Target, settings: ClusterSettings):
        # the kubernetes client loads with the first cluster call, not at the tools service's start
        from kubernetes.client import ApiClient, Configuration, CoreV1Api, VersionApi  # noqa: PLC0415

        self.settings = settings
        cfg = Configuration(host=target.api_url.rstrip("/"), api_key={"authorization": target.token}, api_key_prefix={"authorization": "Bearer"})
        cfg.verify_ssl = True
        cfg.ca_cert_data = target.ca_cert
        cfg.retries = False  # no urllib3 retries: ours below, on the causes that may pass
        self._api = ApiClient(cfg)
        self._core = CoreV1Api(self._api)
        self._version = VersionApi(self._api)
        self._timeout = (settings.connect_timeout_s, settings.read_timeout_s)

    async def __aenter__(self) -> KubeReader:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self._api.close)

    async def _get(self, what: str, fn: Any, **kwargs: Any) -> dict[str, Any]:
        def call() -> dict[str, Any]:
            try:
                response = fn(_preload_content=False, _request_timeout=self._timeout, **kwargs)
                return json.loads(response.data)
            except Exception as e:  # noqa: BLE001 - _classify re-raises what is none of the client's failures
                raise _classify(e, what, self.settings) from None

        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.settings.retries + 1),
            wait=wait_exponential(multiplier=0.1, max=1.0),
            retry=retry_if_exception(lambda e: isinstance(e, KubeError) and e.retryable),
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                body = await asyncio.to_thread(call)
        if not isinstance(body, dict):
            raise KubeError(ErrorCode.UNAVAILABLE, "bad_response", f"the API server's answer to {what} is not an object")
        return body

    async def version(self) -> tuple[dict[str, Any], float]:
        """/version and the round trip in milliseconds."""
        start = time.perf_counter()
        body = await self._get("/version", self._version.get_code)
        return body, (time.perf_counter() - start) * 1000

    async def _list(self, what: str, fn: Any, cap: int) -> tuple[list[dict[str, Any]], bool]:
        """Items of a paginated list, at most `cap`; True when more were left unread."""
        items: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"limit": min(self.settings.page_size, cap - len(items))}
            if token:
                kwargs["_continue"] = token
            page = await self._get(what, fn, **kwargs)
            items.extend(i for i in page.get("items") or [] if isinstance(i, dict))
            token = (page.get("metadata") or {}).get("continue") or None
            if token is None:
                return items[:cap], False
            if len(items) >= cap:
                return items[:cap], True

    async def nodes(self) -> list[dict[str, Any]]:
        return (await self._list("list nodes", self._core.list_node, 5_000))[0]

    async def namespaces(self) -> list[dict[str, Any]]:
        return (await self._list("list namespaces", self._core.list_namespace, 10_000))[0]

    async def pods(self) -> tuple[list[dict[str, Any]], bool]:
        return await self._list("list pods", self._core.list_pod_for_all_namespaces, self.settings.max_pods)

    async def component_statuses(self) -> list[dict[str, Any]] | None:
        """Control-plane components where the API still reports them (deprecated there): None when not visible."""
        try:
            return (await self._list("list componentstatuses", self._core.list_component_status, 100))[0]
        except KubeError as e:
            if e.cause in ("forbidden", "not_found"):
                return None
            raise
