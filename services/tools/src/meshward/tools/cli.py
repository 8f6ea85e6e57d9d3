"""Local CLI tools: `cli_execute` (read-only diagnostics) and `discover_cli_tools`.

Security model (see `command_policy` for the allowlist and deny list):

* **No shell, ever.** The command line is split with POSIX shlex rules; shell syntax (``; & | < > ( )``
  unquoted, ``$``, backticks, backslashes, newlines, non-ASCII) is refused, not escaped. The program is
  resolved on the fixed safe PATH and started with `asyncio.create_subprocess_exec` (an argument vector).
* **Allowlist first**, and an independent deny list that nothing overrides.
* **Sandboxed run**: ``cwd`` is a dedicated 0700 work directory, the environment is only ``PATH`` (the safe
  one) and ``LANG=C.UTF-8``, stdin is ``/dev/null``, the child leads its own session / process group.
* **Bounds**: output over ``max_output_bytes`` (stdout + stderr together) stops the reading and kills the
  process group (``truncated: true``); past ``timeout_s`` the whole group is killed and the call fails with
  ``deadline_exceeded`` (with a note of the partial output). Cancellation (e.g. the registry's own deadline)
  kills the group too. At most ``max_concurrent`` commands run at once; more wait for a slot within the call's
  deadline (at most ``max_queued`` waiting, ``overloaded`` beyond), and concurrent calls of the same argument
  vector (every allowed command is read-only) share one run and its result instead of each starting one.

Human approval (how a command that is *not* allowlisted can run):

* The `cli_execute` tool never runs a command the policy does not allow. With ``approval_mode="ask"`` a
  command that is neither allowlisted nor denied fails with code ``needs_approval`` ("needs human approval:
  ..."); with ``approval_mode="deny"`` (the default) it is simply refused.
* There is deliberately **no** ``approved`` argument and no second tool: the model must not be able to
  approve itself. The supervisor pauses the run on ``needs_approval`` and asks a human; once one approves,
  the supervisor (trusted code, not the model) sends the same call on ``meshward.v1.tools.call_approved``
  (a subject only the supervisor may publish to), which runs `run_approved`: the deny list is checked again
  and the argument vector runs in the same sandbox.
"""
from __future__ import annotations

import asyncio
import os
import re
import signal
import stat
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from meshward.contracts import Content, DataContent, ErrorCode, TextContent
from pydantic import BaseModel, ConfigDict, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from .command_policy import (
    DEFAULT_PATH_ROOTS,
    MAX_COMMAND_CHARS,
    SAFE_PATH,
    CommandPolicy,
    CommandRejected,
    Decision,
    parse_command,
    validate_argv,
)
from .registry import Tool, ToolError

SAFE_ENV: dict[str, str] = {"PATH": SAFE_PATH, "LANG": "C.UTF-8"}
_CHUNK = 16_384
_VERSION_TIMEOUT_S = 2.0


def _default_workdir() -> Path:
    return Path(tempfile.gettempdir()) / f"meshward-cli-{os.getuid()}"


class CliSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MESHWARD_CLI_", extra="ignore")

    approval_mode: Literal["deny", "ask"] = "deny"
    timeout_s: float = Field(default=5.0, gt=0, le=300)
    max_output_bytes: int = Field(default=65_536, ge=256, le=16 * 1024 * 1024)
    workdir: Path = Field(default_factory=_default_workdir)
    path_roots: tuple[str, ...] = DEFAULT_PATH_ROOTS
    max_concurrent: int = Field(default=4, ge=1, le=64)
    max_queued: int = Field(default=256, ge=0, le=10_000)

    def policy(self) -> CommandPolicy:
        return CommandPolicy(approval_mode=self.approval_mode, path_roots=self.path_roots)


# --------------------------------------------------------------------------- the sandboxed runner


@dataclass(frozen=True)
class ExecResult:
    argv: tuple[str, ...]
    exit_code: int | None
    stdout: bytes
    stderr: bytes
    truncated: bool
    duration_ms: float
    pid: int


def prepare_workdir(path: Path) -> Path:
    """Create the confined working directory (0700) or verify it: a real directory, ours, private."""
    path = Path(os.path.abspath(path))
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(path)
    except OSError as e:
        raise ToolError(ErrorCode.UNAVAILABLE, f"cli work directory {path} unusable: {e.strerror}") from None
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise ToolError(ErrorCode.UNAVAILABLE, f"cli work directory {path} is not a plain directory")
    if st.st_uid != os.getuid():
        raise ToolError(ErrorCode.UNAVAILABLE, f"cli work directory {path} belongs to another user")
    if stat.S_IMODE(st.st_mode) & 0o077:
        os.chmod(path, 0o700)
    return path


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    # start_new_session=True: the child leads a process group whose id is its pid.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


async def _execute(program_path: str, argv: Sequence[str], settings: CliSettings) -> ExecResult:
    workdir = prepare_workdir(settings.workdir)
    cap = settings.max_output_bytes
    out, err = bytearray(), bytearray()
    state = {"used": 0, "truncated": False}
    cap_hit = asyncio.Event()
    start = time.perf_counter()
    try:
        proc = await asyncio.create_subprocess_exec(
            program_path,
            *argv[1:],
            cwd=workdir,
            env=dict(SAFE_ENV),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            close_fds=True,
        )
    except OSError as e:
        raise ToolError(ErrorCode.UNAVAILABLE, f"cannot start {argv[0]}: {e.strerror or e}") from None

    async def pump(stream: asyncio.StreamReader, buf: bytearray) -> None:
        while not cap_hit.is_set():
            chunk = await stream.read(_CHUNK)
            if not chunk:
                return
            room = cap - state["used"]
            take = chunk[: max(room, 0)]
            buf += take
            state["used"] += len(take)
            if len(take) < len(chunk):
                state["truncated"] = True
                _kill_group(proc)  # stop the producer now, not when its pipe fills up
                cap_hit.set()
                return

    readers = asyncio.gather(pump(proc.stdout, out), pump(proc.stderr, err))
    readers.add_done_callback(_retrieve)  # a cancelled gather otherwise logs "exception was never retrieved"
    cap_wait = asyncio.ensure_future(cap_hit.wait())
    try:
        async with asyncio.timeout(settings.timeout_s):
            await asyncio.wait({readers, cap_wait}, return_when=asyncio.FIRST_COMPLETED)
            if cap_hit.is_set():
                readers.cancel()
                _close_pipes(proc)  # wait() also waits for the pipes, which nobody reads any more
            else:
                await readers  # re-raise a reader failure, if any
            await proc.wait()
    except TimeoutError:
        _kill_group(proc)
        readers.cancel()
        _close_pipes(proc)
        await _reap(proc)
        partial = _render_output(bytes(out), bytes(err))
        note = f" Partial output ({len(out) + len(err)} bytes): {partial[:500]}" if partial else " No output before the deadline."
        raise ToolError(
            ErrorCode.DEADLINE_EXCEEDED,
            f"{argv[0]} did not finish within {settings.timeout_s:g}s; its process group was killed.{note}",
        ) from None
    finally:
        # Sweep the group in every case: cancellation, a reader failure, or children left behind.
        _kill_group(proc)
        cap_wait.cancel()
        if not readers.done():
            readers.cancel()
            _close_pipes(proc)
    return ExecResult(
        argv=tuple(argv),
        exit_code=proc.returncode,
        stdout=bytes(out),
        stderr=bytes(err),
        truncated=bool(state["truncated"]),
        duration_ms=round((time.perf_counter() - start) * 1000, 3),
        pid=proc.pid,
    )


def _retrieve(fut: asyncio.Future) -> None:
    if not fut.cancelled():
        fut.exception()


def _close_pipes(proc: asyncio.subprocess.Process) -> None:
    transport = getattr(proc, "_transport", None)
    if transport is None:
        return
    for fd in (1, 2):
        pipe = transport.get_pipe_transport(fd)
        if pipe is not None:
            pipe.close()


async def _reap(proc: asyncio.subprocess.Process) -> None:
    try:
        async with asyncio.timeout(2.0):
            await proc.wait()
    except TimeoutError:
        pass


_ANSI_RE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_CTRL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def clean_text(data: bytes) -> str:
    """Decode (UTF-8, replacing errors) and drop terminal escapes and control characters but \\n and \\t."""
    text = data.decode("utf-8", errors="replace").replace("\r\n", "\n")
    return _CTRL_RE.sub("", _ANSI_RE.sub("", text))


def _render_output(stdout: bytes, stderr: bytes) -> str:
    text = clean_text(stdout)
    if stderr:
        if text and not text.endswith("\n"):
            text += "\n"
        text += "[stderr]\n" + clean_text(stderr)
    return text


def result_content(result: ExecResult, cap: int, **extra) -> list[Content]:
    text = _render_output(result.stdout, result.stderr)
    if result.truncated:
        # terse: the model reads `truncated: True` in the data too, and security's model reads a sentence as prose
        text += f"\n[output truncated: {cap} bytes, command stopped]"
    if not text.strip():
        text = "(no output)"  # the exit code follows in the data; a sentence about it reads to security's model as prose
    return [
        TextContent(text=text),
        DataContent(
            data={
                "argv": list(result.argv),
                "exit_code": result.exit_code,
                "truncated": result.truncated,
                "duration_ms": result.duration_ms,
                **extra,
            }
        ),
    ]


def _refusal(decision: Decision) -> ToolError:
    if decision.action == "needs_approval":
        return ToolError(ErrorCode.NEEDS_APPROVAL, f"needs human approval: {decision.reason}")
    if decision.code == ErrorCode.REFUSED:
        return ToolError(ErrorCode.REFUSED, f"refused: {decision.reason}")
    return ToolError(decision.code, decision.reason)


# --------------------------------------------------------------------------- public API


def check_command(command: str, settings: CliSettings | None = None, *, policy: CommandPolicy | None = None) -> Decision:
    """Decide a command line without running it (for the supervisor, before it dispatches `cli_execute`)."""
    policy = policy or (settings or CliSettings()).policy()
    return policy.check(command)


async def run_argv(
    argv: Sequence[str], settings: CliSettings | None = None, *, policy: CommandPolicy | None = None
) -> ExecResult:
    """Run an *allowed* argument vector in the sandbox and return the raw result (refuses anything else)."""
    settings = settings or CliSettings()
    policy = policy or settings.policy()
    try:
        argv = validate_argv(argv)
    except CommandRejected as e:
        raise ToolError(e.code, e.reason) from None
    decision = policy.decide(argv)
    if decision.action != "allow":
        raise _refusal(decision)
    return await _execute(decision.path or _resolve_or_fail(policy, argv[0]), argv, settings)


async def run_approved(
    argv: Sequence[str], settings: CliSettings | None = None, *, policy: CommandPolicy | None = None
) -> list[Content]:
    """Run an argument vector a *human* approved (the supervisor's approval path; never a model tool).

    The deny list still applies (no approval overrides it), as do the sandbox, the timeout and the output cap.
    With ``approval_mode="deny"`` only allowlisted commands run, approved or not.
    """
    settings = settings or CliSettings()
    policy = policy or settings.policy()
    try:
        argv = validate_argv(argv)
    except CommandRejected as e:
        raise ToolError(e.code, e.reason) from None
    decision = policy.decide(argv)
    if decision.action == "refuse":
        raise _refusal(decision)
    result = await _execute(decision.path or _resolve_or_fail(policy, argv[0]), argv, settings)
    # No "approved" marker in the result: the model reads it, and the audit log (memory) records approvals.
    return result_content(result, settings.max_output_bytes)


def _resolve_or_fail(policy: CommandPolicy, program: str) -> str:
    path = policy.resolve(program)
    if path is None:
        raise ToolError(ErrorCode.NOT_FOUND, f"{program!r} is not installed on this host")
    return path


class CliExecuteArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    command: str = Field(
        min_length=1,
        description="one read-only diagnostic command line, e.g. 'df -h' or 'free -m'",
        json_schema_extra={"maxLength": MAX_COMMAND_CHARS},  # enforced by the policy (too_large)
    )


class DiscoverArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


_VERSION_CACHE: dict[str, str | None] = {}


async def _version(path: str, args: tuple[str, ...], settings: CliSettings) -> str | None:
    if path in _VERSION_CACHE:
        return _VERSION_CACHE[path]
    quick = settings.model_copy(update={"timeout_s": _VERSION_TIMEOUT_S, "max_output_bytes": 4096})
    try:
        result = await _execute(path, [path, *args], quick)
    except ToolError:
        version = None
    else:
        first = clean_text(result.stdout).strip().splitlines()
        version = first[0][:120] if result.exit_code == 0 and first else None
    _VERSION_CACHE[path] = version
    return version


async def discover(policy: CommandPolicy, settings: CliSettings) -> list[dict]:
    """Which allowlisted programs exist on this host (safe PATH), with versions (cached per executable)."""

    async def one(rule) -> dict:
        path = policy.resolve(rule.program)
        version = await _version(path, rule.version_args, settings) if path and rule.version_args else None
        return {
            "program": rule.program,
            "available": path is not None,
            "path": path,
            "version": version,
            "allowed": rule.render_forms(),
            "description": rule.description,
        }

    return list(await asyncio.gather(*(one(rule) for rule in policy.allowlist.values())))


class SharedRuns:
    """Bounded concurrency for commands, with identical concurrent commands sharing one run.

    A call whose argument vector is already running joins that run (its result is no older than the call);
    otherwise it waits for one of ``max_concurrent`` slots, and ``overloaded`` only when ``max_queued`` calls
    already wait. A caller that gives up (deadline, cancellation) leaves the shared run to the others; the run
    is cancelled (killing its process group) only when nobody waits for it any more.
    """

    def __init__(self, max_concurrent: int, max_queued: int) -> None:
        self._slots = asyncio.Semaphore(max_concurrent)
        self._max_concurrent = max_concurrent
        self._max_queued = max_queued
        self._queued = 0
        self._running: dict[tuple[str, ...], tuple[asyncio.Task[ExecResult], list[int]]] = {}

    async def run(self, argv: Sequence[str], start: Callable[[], Awaitable[ExecResult]]) -> ExecResult:
        key = tuple(argv)
        entry = self._running.get(key)
        if entry is None:
            if self._slots.locked() and self._queued >= self._max_queued:
                raise ToolError(ErrorCode.OVERLOADED,
                                f"{self._max_concurrent} commands running and {self._queued} waiting; try again shortly")
            task = asyncio.get_running_loop().create_task(self._slotted(start))
            entry = (task, [0])
            self._running[key] = entry
            task.add_done_callback(lambda _t: self._running.pop(key, None) if self._running.get(key) is entry else None)
        task, waiters = entry
        waiters[0] += 1
        try:
            return await asyncio.shield(task)
        finally:
            waiters[0] -= 1
            if waiters[0] == 0 and not task.done():
                task.cancel()

    def waiting(self, argv: Sequence[str]) -> int:
        """How many callers wait for the run of ``argv`` now (0 when none runs)."""
        entry = self._running.get(tuple(argv))
        return entry[1][0] if entry else 0

    async def _slotted(self, start: Callable[[], Awaitable[ExecResult]]) -> ExecResult:
        self._queued += 1
        try:
            await self._slots.acquire()
        finally:
            self._queued -= 1
        try:
            return await start()
        finally:
            self._slots.release()


def cli_tools(settings: CliSettings | None = None, *, policy: CommandPolicy | None = None) -> list[Tool]:
    """The local CLI tools: `cli_execute` and `discover_cli_tools` (``policy`` overrides the settings' one)."""
    settings = settings or CliSettings()
    policy = policy or settings.policy()
    runs = SharedRuns(settings.max_concurrent, settings.max_queued)

    async def cli_execute(args: CliExecuteArgs) -> list[Content]:
        try:
            argv = parse_command(args.command)
        except CommandRejected as e:
            raise ToolError(e.code, e.reason) from None
        decision = policy.decide(argv, raw=args.command)
        if decision.action != "allow":
            raise _refusal(decision)
        path = decision.path or _resolve_or_fail(policy, argv[0])
        result = await runs.run(argv, lambda: _execute(path, argv, settings))
        return result_content(result, settings.max_output_bytes)

    async def cli_execute_approved(args: CliExecuteArgs) -> list[Content]:
        try:
            argv = parse_command(args.command)
        except CommandRejected as e:
            raise ToolError(e.code, e.reason) from None
        return await run_approved(argv, settings, policy=policy)

    async def discover_cli_tools(args: DiscoverArgs) -> list[Content]:
        found = await discover(policy, settings)
        lines = [f"approval mode: {policy.approval_mode}; commands run without a shell, one per call."]
        for item in found:
            if item["available"]:
                version = f" ({item['version']})" if item["version"] else ""
                lines.append(f"- {item['program']}{version}: {' | '.join(item['allowed'])}")
            else:
                lines.append(f"- {item['program']}: not installed")
        return [
            TextContent(text="\n".join(lines)),
            DataContent(data={"approval_mode": policy.approval_mode, "tools": found}),
        ]

    forms = "; ".join(policy.allowed_forms())
    return [
        Tool(
            name="cli_execute",
            description=(
                "Run ONE read-only diagnostic command on this server and return its output. No shell: pipes, "
                "redirections, ';', '&&', '$(...)' and backticks are refused. <path> must be an absolute path under "
                f"{', '.join(policy.path_roots)}. Allowed commands: {forms}."
            ),
            args_model=CliExecuteArgs,
            fn=cli_execute,
            approved_fn=cli_execute_approved,
            requires_approval=False,
            timeout_s=settings.timeout_s + 5.0,
            # without an approval only allowed read-only commands run; an approved one goes by another subject
            read_only=True,
        ),
        Tool(
            name="discover_cli_tools",
            description="List the diagnostic commands cli_execute may run on this server, which are installed, and their versions.",
            args_model=DiscoverArgs,
            fn=discover_cli_tools,
            timeout_s=_VERSION_TIMEOUT_S * 2 + 5.0,
            read_only=True,
        ),
    ]
