"""Command policy for the CLI tools: parse a command line without a shell, then allow / ask / refuse.

Pure logic (no processes are started here). Two independent checks decide every command:

1. **The allowlist** (`DEFAULT_ALLOWLIST`): read-only diagnostics, each an exact program name plus the exact
   argument *forms* it may take. A form is a tuple of literal tokens and placeholders (`PATH`, a confined
   absolute path). `df -h /srv/data` matches the form `("-h", PATH)`; `df -h --output=source` matches nothing.
   There are no regexes over the whole string: the argument vector must equal a form token by token.
2. **The deny list** (`DANGEROUS_PATTERNS`, `DENIED_PROGRAMS`; plus `REMOTE_BLOCKED_PATTERNS` for SSH): the
   reference design's blocked patterns (rm -rf, mkfs, dd, chmod 777, curl|sh, fork bombs, ...) extended with
   privilege escalation, credential files and path traversal. It is applied to *every* command, allowlisted
   or not, and no approval can override it.

`parse_command` refuses shell syntax before any of that: there is never a shell to interpret `;`, `|`,
`&&`, `$(...)`, backticks or redirections, so a command that contains them is refused rather than
"sanitised". Only printable ASCII is accepted, which also rules out Unicode lookalikes (U+FF1B, U+037E)
and control characters (NUL, newline, ESC).

`CommandPolicy.decide(argv)` returns a `Decision`:

* ``allow``: allowlisted (and not denied);
* ``needs_approval``: not allowlisted, not denied, and the policy's ``approval_mode`` is ``"ask"``;
* ``refuse``: denied, malformed, not installed, or not allowlisted with ``approval_mode="deny"`` (the default).

Programs are resolved with `shutil.which` against the fixed `SAFE_PATH`, never the caller's ``PATH``.
"""
from __future__ import annotations

import os
import posixpath
import re
import shlex
import shutil
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from meshward.contracts import ErrorCode

SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
MAX_COMMAND_CHARS = 1_000
MAX_ARGS = 64

ApprovalMode = Literal["deny", "ask"]
Action = Literal["allow", "needs_approval", "refuse"]

# Where `du -sh <path>` / `df -h <path>` may look (a path root, not a temp file: S108 does not apply).
DEFAULT_PATH_ROOTS: tuple[str, ...] = ("/home", "/srv", "/opt", "/tmp", "/var/log", "/var/lib", "/data", "/mnt")  # noqa: S108

_PROGRAM_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")
# Characters that mean shell syntax wherever they appear (quoted or not): expansion, substitution, escapes.
_ALWAYS_FORBIDDEN = {"$": "shell expansion ($)", "`": "command substitution (backtick)", "\\": "backslash escape"}
# Characters that are shell operators when unquoted: separators, pipes, background, redirection, subshells.
_UNQUOTED_FORBIDDEN = {
    ";": "command separator ';'",
    "&": "'&' (background / '&&')",
    "|": "pipe '|'",
    "<": "redirection '<'",
    ">": "redirection '>'",
    "(": "subshell '('",
    ")": "subshell ')'",
}


class CommandRejected(Exception):
    """A command refused before policy evaluation (shell syntax, bad characters, too long...)."""

    def __init__(self, code: ErrorCode, reason: str):
        super().__init__(reason)
        self.code = code
        self.reason = reason


# --------------------------------------------------------------------------- parsing


def _char_name(ch: str) -> str:
    return f"U+{ord(ch):04X} ({unicodedata.name(ch, 'unnamed')})"


def check_chars(text: str) -> None:
    """Printable ASCII (and tab) only; no `$`, backtick or backslash anywhere."""
    for ch in text:
        if ch in "\n\r":
            raise CommandRejected(ErrorCode.REFUSED, "newline in command: one command per call, no command chaining")
        if ch == "\t":
            continue
        code = ord(ch)
        if code < 0x20 or code == 0x7F:
            raise CommandRejected(ErrorCode.REFUSED, f"control character {_char_name(ch)} in command")
        if code > 0x7E:
            raise CommandRejected(
                ErrorCode.REFUSED,
                f"non-ASCII character {_char_name(ch)} in command (refused: lookalike characters can hide shell syntax)",
            )
        if ch in _ALWAYS_FORBIDDEN:
            raise CommandRejected(ErrorCode.REFUSED, f"{_ALWAYS_FORBIDDEN[ch]} is shell syntax; commands run without a shell")


def _check_unquoted(command: str) -> None:
    quote: str | None = None
    for ch in command:
        if quote:
            if ch == quote:
                quote = None
            continue
        if ch in "'\"":
            quote = ch
        elif ch in _UNQUOTED_FORBIDDEN:
            raise CommandRejected(
                ErrorCode.REFUSED,
                f"{_UNQUOTED_FORBIDDEN[ch]} is shell syntax; commands run without a shell, one command per call",
            )
    if quote:
        raise CommandRejected(ErrorCode.BAD_REQUEST, "unbalanced quotes in command")


def parse_command(command: str) -> list[str]:
    """Split a command line into an argument vector (POSIX shlex rules) or raise `CommandRejected`.

    Refused: over `MAX_COMMAND_CHARS` (too_large), over `MAX_ARGS` arguments (too_large), anything but
    printable ASCII (control characters, newlines, NUL, Unicode lookalikes), `$`, backticks and backslashes
    anywhere, and ``; & | < > ( )`` outside quotes. Nothing after a metacharacter is ever considered.
    """
    if not isinstance(command, str):
        raise CommandRejected(ErrorCode.BAD_REQUEST, "command must be a string")
    if len(command) > MAX_COMMAND_CHARS:
        raise CommandRejected(ErrorCode.TOO_LARGE, f"command is {len(command)} characters; the limit is {MAX_COMMAND_CHARS}")
    check_chars(command)
    _check_unquoted(command)
    try:
        argv = shlex.split(command, comments=False, posix=True)
    except ValueError as e:  # unreachable after _check_unquoted, kept as a guard
        raise CommandRejected(ErrorCode.BAD_REQUEST, f"cannot parse command: {e}") from None
    if not argv or not argv[0]:
        raise CommandRejected(ErrorCode.BAD_REQUEST, "empty command")
    if len(argv) > MAX_ARGS:
        raise CommandRejected(ErrorCode.TOO_LARGE, f"command has {len(argv)} arguments; the limit is {MAX_ARGS}")
    return argv


def validate_argv(argv: Sequence[str]) -> list[str]:
    """The same bounds for an argument vector handed over directly (the approval path)."""
    if isinstance(argv, str) or not isinstance(argv, Sequence) or not all(isinstance(a, str) for a in argv):
        raise CommandRejected(ErrorCode.BAD_REQUEST, "argv must be a sequence of strings")
    argv = list(argv)
    if not argv or not argv[0]:
        raise CommandRejected(ErrorCode.BAD_REQUEST, "empty command")
    if len(argv) > MAX_ARGS:
        raise CommandRejected(ErrorCode.TOO_LARGE, f"command has {len(argv)} arguments; the limit is {MAX_ARGS}")
    if sum(len(a) + 1 for a in argv) > MAX_COMMAND_CHARS:
        raise CommandRejected(ErrorCode.TOO_LARGE, f"command is longer than {MAX_COMMAND_CHARS} characters")
    for a in argv:
        check_chars(a)
    return argv


# --------------------------------------------------------------------------- the deny list


@dataclass(frozen=True)
class DenyPattern:
    name: str
    pattern: str
    reason: str
    regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "regex", re.compile(self.pattern, re.IGNORECASE))


_SHELLS = r"(?:ba|z|da|k|mk|c|tc|fi|a)?sh"

# The reference design's `dangerous_patterns`, widened, plus privilege escalation, secrets and traversal.
DANGEROUS_PATTERNS: tuple[DenyPattern, ...] = (
    DenyPattern("rm_recursive", r"(?:^|[\s/])rm\s+(?:\S+\s+)*-(?:[a-z]*r|-recursive)", "recursive delete (rm -r / rm -rf)"),
    DenyPattern("fork_bomb", r":\s*\(\s*\)\s*\{.*:\s*\|\s*:\s*&", "fork bomb"),
    DenyPattern("mkfs", r"\bmkfs(?:\.\w+)?\b|\bmke2fs\b|\bmkswap\b", "filesystem formatting"),
    DenyPattern("dd", r"(?:^|[\s/])dd(?:\s|$)|\b[io]f=/dev/", "raw disk copy (dd)"),
    DenyPattern("disk_overwrite", r">\s*/dev/(?:sd|hd|vd|xvd|nvme|mmcblk|disk)", "write to a raw disk device"),
    DenyPattern("pipe_to_shell", rf"\b(?:curl|wget|fetch)\b.*\|\s*(?:sudo\s+)?{_SHELLS}\b", "download piped to a shell"),
    DenyPattern("chmod_777", r"\bchmod\s+(?:-\S+\s+)*(?:0?777|a?\+rwx)\b", "world-writable permissions (chmod 777)"),
    DenyPattern("chown_recursive", r"\bchown\b.*\s-(?:[a-z]*R|-recursive)", "recursive ownership change (chown -R)"),
    DenyPattern("privilege_escalation", r"(?:^|[\s/])(?:sudo|su|doas|pkexec|runuser)(?:\s|$)", "privilege escalation (sudo/su)"),
    DenyPattern("path_traversal", r"(?:^|[\s/=])\.\.(?:[/\s]|$)", "path traversal (..)"),
    DenyPattern(
        "credential_file",
        r"/etc/(?:shadow|gshadow|sudoers|master\.passwd)|(?:^|/)\.ssh(?:/|\s|$)|\bid_(?:rsa|dsa|ecdsa|ed25519)\b"
        r"|/proc/(?:self|thread-self|\d+)/(?:environ|mem|maps)",
        "reads credentials or process secrets",
    ),
    DenyPattern("reverse_shell", r"/dev/(?:tcp|udp)/", "network shell (/dev/tcp)"),
    DenyPattern("find_exec", r"\bfind\b.*\s-(?:exec|execdir|ok|okdir|delete)\b", "find -exec / -delete"),
    DenyPattern(
        "inline_code",
        rf"(?:^|[\s/])(?:{_SHELLS}|python[\d.]*|perl|ruby|node|nodejs|php|lua|tclsh)\s+(?:-\S+\s+)*-[a-z]*[ce]\b"
        r"|\bsystem\s*\(",
        "inline code for an interpreter (sh -c, python -c, perl -e)",
    ),
)

# The reference design's `remote_blocked`, widened: no power or service control on remote hosts.
REMOTE_BLOCKED_PATTERNS: tuple[DenyPattern, ...] = (
    DenyPattern("reboot", r"\b(?:reboot|shutdown|halt|poweroff)\b|\b(?:telinit|init)\s+[0-6sS]\b", "reboot / shutdown"),
    DenyPattern(
        "service_stop",
        r"\bsystemctl\s+(?:\S+\s+)*(?:stop|restart|kill|disable|mask|isolate|reboot|poweroff|halt)\b"
        r"|\bservice\b.*\b(?:stop|restart)\b",
        "stopping or restarting a service",
    ),
    DenyPattern("kill", r"\bkill\s+(?:\S+\s+)*-(?:9|KILL|SIGKILL)\b|\b(?:killall|pkill)\b", "killing processes"),
)

# argv[0] basenames refused outright: shells (no shell, ever), privilege escalation, disk destroyers.
DENIED_PROGRAMS: frozenset[str] = frozenset(
    {
        "sh", "bash", "zsh", "dash", "ksh", "mksh", "csh", "tcsh", "fish", "ash", "busybox", "eval", "exec", "source",
        "sudo", "su", "doas", "pkexec", "runuser",
        "dd", "mkfs", "mke2fs", "mkswap", "fdisk", "sfdisk", "cfdisk", "parted", "wipefs", "shred", "blkdiscard",
        "nc", "ncat", "netcat", "socat", "telnet",
    }
)
# Programs that run another program: refused when given arguments (the inner program would escape the policy).
EXEC_WRAPPERS: frozenset[str] = frozenset(
    {
        "env", "xargs", "nohup", "timeout", "nice", "ionice", "chroot", "setsid", "stdbuf", "strace", "ltrace",
        "watch", "unshare", "nsenter", "flock", "script", "time", "taskset", "chrt", "systemd-run", "parallel",
    }
)


# --------------------------------------------------------------------------- the allowlist


@dataclass(frozen=True)
class _Placeholder:
    name: str

    def __str__(self) -> str:
        return f"<{self.name}>"


PATH = _Placeholder("path")  # an absolute, normalised path under the policy's path roots

Token = str | _Placeholder


@dataclass(frozen=True)
class AllowRule:
    """One allowlisted program: its exact name and every argument vector (after argv[0]) it may take."""

    program: str
    forms: tuple[tuple[Token, ...], ...]
    description: str = ""
    version_args: tuple[str, ...] | None = ("--version",)

    def render_forms(self) -> list[str]:
        return [" ".join([self.program, *map(str, form)]) for form in self.forms]


DEFAULT_ALLOWLIST: tuple[AllowRule, ...] = (
    AllowRule("uptime", ((), ("-p",)), "time since boot and load averages"),
    AllowRule("nproc", ((),), "number of CPUs"),
    AllowRule("hostname", ((),), "host name"),
    AllowRule("uname", (("-a",), ("-r",), ("-m",), ("-s",)), "kernel and architecture"),
    AllowRule("who", ((), ("-b",)), "logged-in users / last boot"),
    AllowRule("date", ((),), "current date and time"),
    AllowRule("lscpu", ((),), "CPU details"),
    AllowRule("free", (("-m",), ("-h",), ("-g",)), "memory usage"),
    AllowRule("vmstat", ((),), "virtual memory statistics"),
    AllowRule("df", (("-h",), ("-h", "/"), ("-h", PATH), ("-hT",), ("-i",)), "disk usage per filesystem"),
    AllowRule("du", (("-sh", PATH),), "size of a directory tree (confined paths)"),
    AllowRule(
        "cat",
        (("/proc/loadavg",), ("/proc/meminfo",), ("/proc/cpuinfo",), ("/proc/uptime",), ("/proc/version",)),
        "selected /proc files",
    ),
    AllowRule(
        "ps",
        (
            ("aux", "--sort=-%cpu"),
            ("aux", "--sort=-%mem"),
            ("-eo", "pid,comm,%cpu,%mem", "--sort=-%cpu"),
            ("-eo", "pid,comm,%cpu,%mem", "--sort=-%mem"),
        ),
        "processes by CPU / memory (output is capped)",
    ),
    AllowRule("top", (("-b", "-n", "1"),), "one batch snapshot of top (output is capped)", version_args=("-V",)),
)


# --------------------------------------------------------------------------- decisions


@dataclass(frozen=True)
class Decision:
    action: Action
    reason: str
    program: str | None = None  # argv[0] as given (a bare program name)
    argv: tuple[str, ...] = ()
    path: str | None = None  # the resolved executable (local policies), None when not resolved
    code: ErrorCode = ErrorCode.REFUSED  # the error code to report when action == "refuse"
    rule: str | None = None  # "allow:df -h <path>", "deny:rm_recursive", ...

    @property
    def allowed(self) -> bool:
        return self.action == "allow"


class CommandPolicy:
    """Allowlist + deny list + approval mode. Immutable after construction."""

    def __init__(
        self,
        allowlist: Iterable[AllowRule] = DEFAULT_ALLOWLIST,
        *,
        approval_mode: ApprovalMode = "deny",
        path_roots: Iterable[str] = DEFAULT_PATH_ROOTS,
        deny_patterns: Iterable[DenyPattern] = DANGEROUS_PATTERNS,
        denied_programs: Iterable[str] = DENIED_PROGRAMS,
        exec_wrappers: Iterable[str] = EXEC_WRAPPERS,
        search_path: str = SAFE_PATH,
        resolve_programs: bool = True,
        resolve_paths: bool = True,
    ):
        if approval_mode not in ("deny", "ask"):
            raise ValueError(f"approval_mode must be 'deny' or 'ask', not {approval_mode!r}")
        rules: dict[str, AllowRule] = {}
        for rule in allowlist:
            if not _PROGRAM_RE.fullmatch(rule.program):
                raise ValueError(f"allowlist program must be a bare name: {rule.program!r}")
            if rule.program in rules:
                raise ValueError(f"allowlist program {rule.program!r} listed twice")
            rules[rule.program] = rule
        roots = []
        for root in path_roots:
            if not root.startswith("/") or (root != "/" and posixpath.normpath(root) != root.rstrip("/")):
                raise ValueError(f"path root must be an absolute normalised path: {root!r}")
            roots.append(root if root == "/" else root.rstrip("/"))
        self._allowlist: Mapping[str, AllowRule] = MappingProxyType(rules)
        self.approval_mode: ApprovalMode = approval_mode
        self.path_roots: tuple[str, ...] = tuple(roots)
        self.deny_patterns: tuple[DenyPattern, ...] = tuple(deny_patterns)
        self.denied_programs: frozenset[str] = frozenset(denied_programs)
        self.exec_wrappers: frozenset[str] = frozenset(exec_wrappers)
        self.search_path = search_path
        self.resolve_programs = resolve_programs
        self.resolve_paths = resolve_paths

    # ---- views

    @property
    def allowlist(self) -> Mapping[str, AllowRule]:
        """program -> AllowRule (a read-only mapping)."""
        return self._allowlist

    def allowed_forms(self) -> list[str]:
        return [form for rule in self._allowlist.values() for form in rule.render_forms()]

    def resolve(self, program: str) -> str | None:
        """The executable for a bare program name on the fixed safe PATH (never the caller's PATH)."""
        if not _PROGRAM_RE.fullmatch(program):
            return None
        found = shutil.which(program, path=self.search_path)
        return os.path.abspath(found) if found else None

    # ---- checks

    def check(self, command: str) -> Decision:
        """Parse and decide; never raises (a parse failure is a refusal with its error code)."""
        try:
            argv = parse_command(command)
        except CommandRejected as e:
            return Decision("refuse", e.reason, code=e.code, rule="parse")
        return self.decide(argv, raw=command)

    def denied(self, argv: Sequence[str], raw: str | None = None) -> tuple[str, str] | None:
        """The deny list, independent of the allowlist: (rule, reason) when denied, else None.

        Checked against the argument vector joined with spaces (so quoting cannot hide `rm "-rf"`) and
        against the raw command line when there is one."""
        program = posixpath.basename(argv[0]) if argv else ""
        if program in self.denied_programs or program.startswith("mkfs."):
            return f"deny:{program}", f"{program!r} is never allowed"
        if program in self.exec_wrappers and len(argv) > 1:
            return f"deny:{program}", f"{program!r} with arguments would run another program outside the policy"
        texts = [" ".join(argv)]
        if raw is not None and raw != texts[0]:
            texts.append(raw)
        for pattern in self.deny_patterns:
            if any(pattern.regex.search(t) for t in texts):
                return f"deny:{pattern.name}", f"matches a blocked pattern: {pattern.reason}"
        return None

    def decide(self, argv: Sequence[str], raw: str | None = None) -> Decision:
        try:
            argv = validate_argv(argv)
        except CommandRejected as e:
            return Decision("refuse", e.reason, code=e.code, rule="parse")
        program = argv[0]
        av = tuple(argv)
        denied = self.denied(argv, raw)
        if denied:
            rule, reason = denied
            return Decision("refuse", reason, program=program, argv=av, rule=rule)
        if not _PROGRAM_RE.fullmatch(program):
            return Decision(
                "refuse",
                f"program must be a bare name like 'df' (no paths, no assignments), got {program!r}",
                program=program,
                argv=av,
                rule="program_name",
            )
        rule = self._allowlist.get(program)
        why_not = f"{program!r} is not on the allowlist"
        if rule is not None:
            matched, why = self._match(rule, argv[1:])
            if matched is not None:
                path, missing = self._resolved(program, av)
                if missing:
                    return missing
                return Decision("allow", f"allowlisted: {matched}", program=program, argv=av, path=path, rule=f"allow:{matched}")
            why_not = f"arguments not allowed for {program!r}{': ' + why if why else ''}; allowed: " + " | ".join(
                rule.render_forms()
            )
        if self.approval_mode == "ask":
            path, missing = self._resolved(program, av)
            if missing:
                return missing
            return Decision(
                "needs_approval", f"{why_not}; a human must approve it", program=program, argv=av, path=path,
                rule="approval",
            )
        return Decision("refuse", why_not, program=program, argv=av, rule="not_allowlisted")

    def _resolved(self, program: str, argv: tuple[str, ...]) -> tuple[str | None, Decision | None]:
        if not self.resolve_programs:
            return None, None
        path = self.resolve(program)
        if path is None:
            return None, Decision(
                "refuse", f"{program!r} is not installed on this host", program=program, argv=argv,
                code=ErrorCode.NOT_FOUND, rule="not_installed",
            )
        return path, None

    # ---- matching

    def _match(self, rule: AllowRule, args: Sequence[str]) -> tuple[str | None, str | None]:
        why: str | None = None
        for form in rule.forms:
            if len(form) != len(args):
                continue
            ok = True
            for token, arg in zip(form, args, strict=True):
                if isinstance(token, _Placeholder):
                    problem = self.check_path(arg)
                    if problem:
                        ok, why = False, problem
                        break
                elif token != arg:
                    ok = False
                    break
            if ok:
                return " ".join([rule.program, *map(str, form)]), None
        return None, why

    def check_path(self, arg: str) -> str | None:
        """A reason the path is not acceptable, or None: absolute, normalised, under a root (and, locally,
        still under a root once symlinks are resolved)."""
        if not arg.startswith("/"):
            return f"path {arg!r} must be absolute"
        parts = arg.split("/")[1:]
        if arg != "/" and (any(p in ("", ".", "..") for p in parts[:-1]) or parts[-1] in (".", "..")):
            return f"path {arg!r} must be normalised (no '.', '..' or '//')"
        norm = posixpath.normpath(arg)
        if not self._under_roots(norm):
            return f"path {arg!r} is outside the allowed roots ({', '.join(self.path_roots)})"
        if self.resolve_paths:
            real = os.path.realpath(norm)
            if not self._under_roots(real):
                return f"path {arg!r} resolves to {real!r}, outside the allowed roots"
        return None

    def _under_roots(self, path: str) -> bool:
        return any(root == "/" or path == root or path.startswith(root + "/") for root in self.path_roots)
