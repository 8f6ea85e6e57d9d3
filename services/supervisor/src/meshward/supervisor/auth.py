"""API keys and rate limits at the ingress: one ASGI middleware in front of every route.

Keys are random (`mw_` + 32 bytes, base64url) and stored as SHA-256 digests: a key has 256 bits of entropy, so a
slow password hash adds nothing but latency, and a stolen key file does not reveal any key. Two sources, merged:
the key file (`meshward keys create|list|revoke`, JSON, 0600, re-read when it changes, so every replica that
mounts it sees a revocation) and `MESHWARD_API_KEYS` (`name=key` or `name=sha256:<hex>`, comma-separated; for
a k8s Secret or compose). A key is accepted in `X-Api-Key` (what langgraph-sdk sends) or `Authorization: Bearer`.

The caller's identity goes to `request.state.principal`: the key's name, or `local` when auth is not required
and no key was sent. Every caller gets a token bucket (per key name, or per client address without a key):
over the limit, 429 with Retry-After. A traceparent is trusted as a parent only from an authenticated caller
or from this machine (loopback): anyone else's is dropped before tracing reads it.
"""
from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import math
import os
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

KEY_PREFIX = "mw_"
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
MAX_KEY_CHARS = 256
# Reachable without a key: the console's page and modules (its API calls carry the key), and the probes.
PUBLIC_PATHS = ("/", "/healthz", "/favicon.ico")
PUBLIC_PREFIXES = ("/console/",)


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class KeyFile:
    """The key store under the data dir: {"keys": [{"name", "sha256", "created_at", "revoked_at"}]}."""

    def __init__(self, path: Path):
        self.path = path
        self._seen: tuple[float, int] | None = None
        self._active: dict[str, str] = {}  # digest -> name

    def _read(self) -> list[dict[str, Any]]:
        try:
            return json.loads(self.path.read_text(encoding="utf-8")).get("keys", [])
        except FileNotFoundError:
            return []

    def _write(self, keys: list[dict[str, Any]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"keys": keys}, f, indent=1)
        os.replace(tmp, self.path)  # readers see the old or the new file, never half of one

    def create(self, name: str) -> str:
        keys = self._read()
        if any(k["name"] == name and not k.get("revoked_at") for k in keys):
            raise ValueError(f"an active key named {name!r} exists; revoke it first or pick another name")
        key = new_key()
        keys.append({"name": name, "sha256": digest(key), "created_at": datetime.now(UTC).isoformat(), "revoked_at": None})
        self._write(keys)
        return key

    def revoke(self, name: str) -> bool:
        keys = self._read()
        hit = False
        for k in keys:
            if k["name"] == name and not k.get("revoked_at"):
                k["revoked_at"] = datetime.now(UTC).isoformat()
                hit = True
        if hit:
            self._write(keys)
        return hit

    def list(self) -> list[dict[str, Any]]:
        return [{k: v for k, v in entry.items() if k != "sha256"} for entry in self._read()]

    def active(self) -> dict[str, str]:
        """digest -> name of unrevoked keys, re-read when the file changed (a revocation applies at once)."""
        try:
            st = self.path.stat()
            seen = (st.st_mtime, st.st_size)
        except FileNotFoundError:
            seen = None
        if seen != self._seen:
            self._seen = seen
            self._active = {k["sha256"]: k["name"] for k in self._read() if not k.get("revoked_at")}
        return self._active


def parse_env_keys(value: str) -> dict[str, str]:
    """MESHWARD_API_KEYS: `name=key` or `name=sha256:<hex>`, comma-separated -> digest -> name."""
    out: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in value.split(","))):
        name, sep, secret = item.partition("=")
        if not sep or not name or not secret:
            raise ValueError("MESHWARD_API_KEYS entries are name=key or name=sha256:<64 hex>, comma-separated")
        if secret.startswith("sha256:"):
            hexd = secret.removeprefix("sha256:").lower()
            if len(hexd) != 64 or any(c not in "0123456789abcdef" for c in hexd):
                raise ValueError(f"MESHWARD_API_KEYS: {name}'s sha256 digest must be 64 hex characters")
            out[hexd] = name
        else:
            if len(secret) < 24:
                raise ValueError(f"MESHWARD_API_KEYS: {name}'s key is too short (24+ characters; `meshward keys create` makes one)")
            out[digest(secret)] = name
    return out


class Keys:
    def __init__(self, file: KeyFile | None, env: dict[str, str]):
        self.file, self.env = file, env

    def __bool__(self) -> bool:
        return bool(self.env) or bool(self.file and self.file.active())

    def name_of(self, key: str) -> str | None:
        if len(key) > MAX_KEY_CHARS:
            return None
        d = digest(key)
        for table in (self.env, self.file.active() if self.file else {}):
            for known, name in table.items():
                if hmac.compare_digest(known, d):
                    return name
        return None


@dataclass
class Bucket:
    tokens: float
    at: float


class RateLimiter:
    """A token bucket per caller: `per_minute` requests, refilled continuously, bursts up to the same number."""

    def __init__(self, per_minute: int, max_callers: int = 10_000):
        self.rate = per_minute / 60.0
        self.capacity = float(per_minute)
        self.max_callers = max_callers
        self._buckets: dict[str, Bucket] = {}

    def take(self, caller: str, now: float | None = None) -> float:
        """0 when allowed, else the seconds until one request is allowed."""
        now = time.monotonic() if now is None else now
        b = self._buckets.get(caller)
        if b is None:
            if len(self._buckets) >= self.max_callers:  # bounded memory: forget the longest idle
                self._buckets.pop(min(self._buckets, key=lambda k: self._buckets[k].at))
            b = self._buckets[caller] = Bucket(self.capacity, now)
        b.tokens = min(self.capacity, b.tokens + (now - b.at) * self.rate)
        b.at = now
        if b.tokens >= 1.0:
            b.tokens -= 1.0
            return 0.0
        return (1.0 - b.tokens) / self.rate


def _header(scope: dict, name: bytes) -> str | None:
    for k, v in scope.get("headers") or ():
        if k == name:
            return v.decode("latin-1")
    return None


def presented_key(scope: dict) -> str | None:
    key = _header(scope, b"x-api-key")
    if key:
        return key.strip()
    auth = _header(scope, b"authorization")
    if auth and auth[:7].lower() == "bearer ":
        return auth[7:].strip()
    return None


class ExposureError(ValueError):
    """The ingress would listen beyond loopback without keys."""


def configure(host: str, auth: str, env_keys: str | None, key_file: Path) -> tuple[Keys, bool]:
    """(the keys, whether a key is required), or ExposureError saying what to set."""
    keys = Keys(KeyFile(key_file), parse_env_keys(env_keys or ""))
    local = is_loopback(host)
    if auth == "off" and not local:
        raise ExposureError(f"MESHWARD_AUTH=off is refused when the ingress listens on {host} (beyond loopback): "
                            "set MESHWARD_AUTH=required and give keys (MESHWARD_API_KEYS or `meshward keys create NAME`)")
    required = auth == "required" or (auth == "auto" and not local)
    if required and not keys:
        raise ExposureError(f"the ingress on {host} requires API keys and none are configured: set MESHWARD_API_KEYS=name=<key> "
                            f"(a k8s Secret, a compose env) or run `meshward keys create NAME` (file {key_file})")
    return keys, required


class AuthMiddleware:
    def __init__(self, app, keys: Keys, required: bool, limiter: RateLimiter | None):
        self.app, self.keys, self.required, self.limiter = app, keys, required, limiter

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope.get("path", "")
        client = (scope.get("client") or ("", 0))[0]
        # With no keys configured at all (loopback, auth optional) a sent key has nothing to be checked against and
        # is ignored; once keys exist, a wrong one is refused rather than quietly treated as anonymous.
        key = presented_key(scope) if (self.required or self.keys) else None
        name = self.keys.name_of(key) if key else None
        if key and name is None:
            return await _deny(send, 401, "unauthorized", "the API key is not valid (unknown or revoked); create one with `meshward keys create NAME`")
        public = path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES) or scope.get("method") == "OPTIONS"
        if name is None and self.required and not public:
            return await _deny(send, 401, "unauthorized", "an API key is required: send it in X-Api-Key or Authorization: Bearer (`meshward keys create NAME` makes one)")
        if self.limiter is not None and not public:
            wait = self.limiter.take(f"key:{name}" if name else f"addr:{client}")
            if wait > 0:
                retry = max(1, math.ceil(wait))
                return await _deny(send, 429, "rate_limited", f"over the rate limit; retry in {retry}s", [(b"retry-after", str(retry).encode())])
        scope.setdefault("state", {})["principal"] = name or "local"
        if name is None and not is_loopback(client):
            # an unauthenticated caller's trace context is not trusted as a parent
            scope["headers"] = [(k, v) for k, v in scope.get("headers") or () if k not in (b"traceparent", b"tracestate")]
        return await self.app(scope, receive, send)


async def _deny(send, status: int, code: str, message: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps({"error": {"code": code, "message": message, "details": []}}).encode()
    extra = [(b"www-authenticate", b'Bearer realm="meshward", ApiKey header="X-Api-Key"')] if status == 401 else []
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *extra, *(headers or [])]})
    await send({"type": "http.response.body", "body": body})
