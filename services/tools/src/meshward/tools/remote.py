"""`remote_cli`: the same read-only diagnostics, on a *configured* remote host, over SSH (asyncssh).

* ``host`` is an alias from `RemoteSettings.hosts`, never a hostname: the model cannot point the tool at an
  arbitrary machine. An unknown alias is ``not_found``.
* The command goes through the same `CommandPolicy` as `cli_execute` (allowlist + deny list), plus the
  reference design's ``remote_blocked`` patterns (reboot, shutdown, systemctl stop, kill -9, ...). Nothing
  that fails the policy ever opens a connection. Paths are checked lexically (the remote filesystem is not
  visible here) and programs are not resolved locally.
* The remote side runs the command through the login shell, so the command string is rebuilt from the
  checked argument vector with `shlex.join` (POSIX quoting; the remote login shell must be POSIX). The
  policy already refuses `$`, backticks, backslashes, control and non-ASCII characters in every argument.
* Host keys are always verified against ``known_hosts`` (required; an empty or missing file refuses every
  connection). No ~/.ssh/config, no agent, no password or keyboard-interactive auth, no forwarding, no pty:
  only the configured client key.
* Typed errors: host key mismatch and authentication failure -> ``refused``; unreachable, handshake not
  finished within ``connect_timeout_s``, connection lost -> ``unavailable``; command past ``timeout_s`` ->
  ``deadline_exceeded``. Output over ``max_output_bytes`` is cut (``truncated``) and the channel closed.

Approval works as for the local tool (see `meshward.tools.cli`): the supervisor calls
`check_remote_command(host, command)` before dispatching and, after a human approves a ``needs_approval``
decision, calls `run_remote_approved(host, decision.argv, settings)`; neither is a model-facing tool.
"""
from __future__ import annotations

import asyncio
import contextlib
import re
import shlex
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import asyncssh
from meshward.contracts import Content, ErrorCode
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from .cli import ExecResult, clean_text, result_content
from .command_policy import (
    DANGEROUS_PATTERNS,
    DEFAULT_PATH_ROOTS,
    MAX_COMMAND_CHARS,
    REMOTE_BLOCKED_PATTERNS,
    CommandPolicy,
    CommandRejected,
    Decision,
    parse_command,
    validate_argv,
)
from .registry import Tool, ToolError

ALIAS_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
_ALIAS_RE = re.compile(ALIAS_PATTERN)
_CHUNK = 16_384


class RemoteHost(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = Field(min_length=1, max_length=253)
    port: int = Field(default=22, ge=1, le=65_535)
    username: str = Field(min_length=1, max_length=64)
    client_key: Path


class RemoteSettings(BaseSettings):
    """MESHWARD_SSH_HOSTS='{"web1": {"host": "10.0.0.5", "username": "diag", "client_key": "/run/keys/diag"}}'"""

    model_config = SettingsConfigDict(env_prefix="MESHWARD_SSH_", extra="ignore")

    hosts: dict[str, RemoteHost] = Field(default_factory=dict)
    known_hosts: Path | None = None  # required as soon as a host is configured
    connect_timeout_s: float = Field(default=5.0, gt=0, le=60)
    timeout_s: float = Field(default=10.0, gt=0, le=300)
    max_output_bytes: int = Field(default=65_536, ge=256, le=16 * 1024 * 1024)
    approval_mode: Literal["deny", "ask"] = "deny"
    path_roots: tuple[str, ...] = DEFAULT_PATH_ROOTS

    @field_validator("hosts")
    @classmethod
    def _aliases(cls, hosts: dict[str, RemoteHost]) -> dict[str, RemoteHost]:
        for alias in hosts:
            if not _ALIAS_RE.match(alias):
                raise ValueError(f"host alias {alias!r} must match {ALIAS_PATTERN}")
        return hosts

    @model_validator(mode="after")
    def _known_hosts_required(self) -> RemoteSettings:
        if self.hosts and self.known_hosts is None:
            raise ValueError("MESHWARD_SSH_KNOWN_HOSTS is required when hosts are configured: host keys are always checked")
        return self

    def policy(self) -> CommandPolicy:
        return remote_policy(self.approval_mode, self.path_roots)


def remote_policy(approval_mode: Literal["deny", "ask"] = "deny", path_roots=DEFAULT_PATH_ROOTS) -> CommandPolicy:
    """The local allowlist, the deny list plus `REMOTE_BLOCKED_PATTERNS`, lexical path checks only."""
    return CommandPolicy(
        approval_mode=approval_mode,
        path_roots=path_roots,
        deny_patterns=DANGEROUS_PATTERNS + REMOTE_BLOCKED_PATTERNS,
        resolve_programs=False,
        resolve_paths=False,
    )


def build_remote_command(argv: Sequence[str]) -> str:
    """The string the remote shell receives: every argument POSIX-quoted (after the policy checks)."""
    return shlex.join(validate_argv(argv))


# --------------------------------------------------------------------------- the SSH run


def _target(settings: RemoteSettings, alias: str) -> RemoteHost:
    target = settings.hosts.get(alias)
    if target is None:
        known = ", ".join(sorted(settings.hosts)) or "none configured"
        raise ToolError(ErrorCode.NOT_FOUND, f"unknown host alias {alias!r}; configured hosts: {known}")
    return target


def _load_known_hosts(settings: RemoteSettings) -> asyncssh.SSHKnownHosts:
    path = settings.known_hosts
    if path is None:
        raise ToolError(ErrorCode.REFUSED, "no known_hosts file configured; refusing to connect without host key verification")
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise ToolError(
            ErrorCode.REFUSED, f"known_hosts file {path} unreadable ({e.strerror}); refusing to connect without host key verification"
        ) from None
    try:
        return asyncssh.import_known_hosts(text)
    except (ValueError, asyncssh.KeyImportError) as e:
        raise ToolError(ErrorCode.REFUSED, f"known_hosts file {path} is invalid: {e}") from None


def _load_client_key(alias: str, target: RemoteHost) -> asyncssh.SSHKey:
    try:
        return asyncssh.read_private_key(str(target.client_key))
    except (OSError, ValueError, asyncssh.KeyImportError) as e:
        raise ToolError(ErrorCode.UNAVAILABLE, f"client key for host {alias!r} unusable: {e}") from None


async def _connect(alias: str, target: RemoteHost, settings: RemoteSettings) -> asyncssh.SSHClientConnection:
    known_hosts = _load_known_hosts(settings)
    key = _load_client_key(alias, target)
    try:
        async with asyncio.timeout(settings.connect_timeout_s):
            return await asyncssh.connect(
                target.host,
                target.port,
                username=target.username,
                known_hosts=known_hosts,  # never None: None would disable host key checking
                client_keys=[key],
                config=[],  # ignore ~/.ssh/config
                agent_path=None,
                agent_forwarding=False,
                x11_forwarding=False,
                preferred_auth="publickey",
                password_auth=False,
                kbdint_auth=False,
                host_based_auth=False,
                gss_auth=False,
                gss_kex=False,
                pkcs11_provider=None,
                x509_trusted_certs=None,  # no implicit ~/.ssh/ca-bundle.crt
                x509_trusted_cert_paths=[],
                connect_timeout=settings.connect_timeout_s,
                login_timeout=settings.connect_timeout_s,
                keepalive_interval=0,
            )
    except asyncssh.HostKeyNotVerifiable as e:
        raise ToolError(
            ErrorCode.REFUSED,
            f"host key of {alias!r} is not trusted by known_hosts (mismatch or not listed): refusing to connect, "
            f"possible man-in-the-middle ({e.reason})",
        ) from None
    except asyncssh.PermissionDenied:
        raise ToolError(ErrorCode.REFUSED, f"authentication to {alias!r} as {target.username!r} failed") from None
    except TimeoutError:
        raise ToolError(
            ErrorCode.UNAVAILABLE, f"{alias!r} did not complete the SSH handshake within {settings.connect_timeout_s:g}s"
        ) from None
    except (OSError, asyncssh.Error) as e:
        raise ToolError(ErrorCode.UNAVAILABLE, f"cannot reach {alias!r}: {e}") from None


async def _run_remote(alias: str, argv: list[str], settings: RemoteSettings) -> list[Content]:
    target = _target(settings, alias)
    command = build_remote_command(argv)
    start = time.perf_counter()
    conn = await _connect(alias, target, settings)
    cap = settings.max_output_bytes
    out, err = bytearray(), bytearray()
    state = {"used": 0, "truncated": False}
    proc = None
    cap_hit = asyncio.Event()
    tasks: list[asyncio.Future] = []
    try:
        async with asyncio.timeout(settings.timeout_s):
            proc = await conn.create_process(command, stdin=asyncssh.DEVNULL, encoding=None)

            async def pump(stream, buf: bytearray) -> None:
                while not cap_hit.is_set():
                    chunk = await stream.read(_CHUNK)
                    if not chunk:
                        return
                    take = chunk[: max(cap - state["used"], 0)]
                    buf += take
                    state["used"] += len(take)
                    if len(take) < len(chunk):
                        state["truncated"] = True
                        cap_hit.set()
                        return

            readers = asyncio.gather(pump(proc.stdout, out), pump(proc.stderr, err))
            readers.add_done_callback(_retrieve)  # a cancelled gather otherwise logs "never retrieved"
            cap_wait = asyncio.ensure_future(cap_hit.wait())
            tasks = [readers, cap_wait]
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            if cap_hit.is_set():
                readers.cancel()  # stop reading; the channel (and connection) is closed below
                proc.close()
            else:
                await readers
                await proc.wait(check=False)
    except TimeoutError:
        conn.abort()
        partial = clean_text(bytes(out) + bytes(err))
        note = f" Partial output ({len(out) + len(err)} bytes): {partial[:500]}" if partial else " No output before the deadline."
        raise ToolError(
            ErrorCode.DEADLINE_EXCEEDED, f"{argv[0]} on {alias!r} did not finish within {settings.timeout_s:g}s.{note}"
        ) from None
    except asyncssh.ChannelOpenError as e:
        conn.abort()
        raise ToolError(ErrorCode.UNAVAILABLE, f"{alias!r} refused the session: {e.reason}") from None
    except (OSError, asyncssh.Error) as e:
        conn.abort()
        raise ToolError(ErrorCode.UNAVAILABLE, f"connection to {alias!r} failed during the command: {e}") from None
    finally:
        for task in tasks:
            task.cancel()
        conn.close()
        with contextlib.suppress(Exception):
            async with asyncio.timeout(1.0):
                await conn.wait_closed()
    result = ExecResult(
        argv=tuple(argv),
        exit_code=proc.exit_status if proc is not None else None,
        stdout=bytes(out),
        stderr=bytes(err),
        truncated=bool(state["truncated"]),
        duration_ms=round((time.perf_counter() - start) * 1000, 3),
        pid=0,
    )
    return result_content(result, cap, host=alias)


def _retrieve(fut: asyncio.Future) -> None:
    if not fut.cancelled():
        fut.exception()


def _refusal(decision: Decision) -> ToolError:
    if decision.action == "needs_approval":
        return ToolError(ErrorCode.NEEDS_APPROVAL, f"needs human approval: {decision.reason}")
    return ToolError(decision.code, f"refused: {decision.reason}" if decision.code == ErrorCode.REFUSED else decision.reason)


# --------------------------------------------------------------------------- public API


def check_remote_command(
    host: str, command: str, settings: RemoteSettings | None = None, *, policy: CommandPolicy | None = None
) -> Decision:
    """Decide a remote command without connecting (an unknown alias is a refusal with code not_found)."""
    settings = settings or RemoteSettings()
    if host not in settings.hosts:
        return Decision("refuse", f"unknown host alias {host!r}", code=ErrorCode.NOT_FOUND, rule="host")
    return (policy or settings.policy()).check(command)


async def run_remote_approved(
    host: str, argv: Sequence[str], settings: RemoteSettings | None = None, *, policy: CommandPolicy | None = None
) -> list[Content]:
    """Run an argument vector a human approved on a configured host (supervisor only; never a model tool).

    The deny list and the remote blocked patterns still apply; with ``approval_mode="deny"`` only
    allowlisted commands run."""
    settings = settings or RemoteSettings()
    policy = policy or settings.policy()
    _target(settings, host)
    try:
        argv = validate_argv(argv)
    except CommandRejected as e:
        raise ToolError(e.code, e.reason) from None
    decision = policy.decide(argv)
    if decision.action == "refuse":
        raise _refusal(decision)
    return await _run_remote(host, argv, settings)


class RemoteCliArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    host: str = Field(min_length=1, max_length=64, pattern=ALIAS_PATTERN, description="alias of a configured remote host")
    command: str = Field(
        min_length=1,
        description="one read-only diagnostic command line, e.g. 'uptime' or 'df -h'",
        json_schema_extra={"maxLength": MAX_COMMAND_CHARS},
    )


def remote_tools(settings: RemoteSettings | None = None, *, policy: CommandPolicy | None = None) -> list[Tool]:
    """The `remote_cli` tool (``policy`` overrides the settings' one)."""
    settings = settings or RemoteSettings()
    policy = policy or settings.policy()

    async def remote_cli(args: RemoteCliArgs) -> list[Content]:
        _target(settings, args.host)
        try:
            argv = parse_command(args.command)
        except CommandRejected as e:
            raise ToolError(e.code, e.reason) from None
        decision = policy.decide(argv, raw=args.command)
        if decision.action != "allow":
            raise _refusal(decision)
        # Another machine: every command, allowlisted or not, runs only once a human approved it (the approved path).
        raise ToolError(ErrorCode.NEEDS_APPROVAL, f"needs human approval: every remote_cli command on {args.host} is approved by a human ({decision.reason})")

    async def remote_cli_approved(args: RemoteCliArgs) -> list[Content]:
        try:
            argv = parse_command(args.command)
        except CommandRejected as e:
            raise ToolError(e.code, e.reason) from None
        return await run_remote_approved(args.host, argv, settings, policy=policy)

    hosts = ", ".join(sorted(settings.hosts)) or "none configured"
    return [
        Tool(
            name="remote_cli",
            description=(
                f"Run ONE read-only diagnostic command on a configured remote host over SSH (hosts: {hosts}); "
                "each call waits for a human's approval. "
                "No shell syntax (pipes, redirections, ';', '&&', '$(...)'). Allowed commands: "
                f"{'; '.join(policy.allowed_forms())}."
            ),
            args_model=RemoteCliArgs,
            fn=remote_cli,
            approved_fn=remote_cli_approved,
            requires_approval=False,
            timeout_s=settings.connect_timeout_s + settings.timeout_s + 5.0,
        )
    ]
