"""Unit tests for the CLI command policy (meshward.tools.command_policy): parsing, allowlist, deny list."""
from __future__ import annotations

import os
import shutil

import pytest
from meshward.contracts import ErrorCode
from meshward.tools.command_policy import (
    DEFAULT_ALLOWLIST,
    MAX_ARGS,
    MAX_COMMAND_CHARS,
    PATH,
    SAFE_PATH,
    AllowRule,
    CommandPolicy,
    CommandRejected,
    parse_command,
    validate_argv,
)
from meshward.tools.remote import build_remote_command, remote_policy

# --------------------------------------------------------------------------- parse_command


@pytest.mark.parametrize(
    ("command", "argv"),
    [
        ("uptime", ["uptime"]),
        ("df -h", ["df", "-h"]),
        ("  free   -m  ", ["free", "-m"]),
        ("ps aux --sort=-%cpu", ["ps", "aux", "--sort=-%cpu"]),
        ("du -sh '/srv/my dir'", ["du", "-sh", "/srv/my dir"]),
        ('du -sh "/srv/a;b|c>d"', ["du", "-sh", "/srv/a;b|c>d"]),  # quoted metacharacters are literal bytes
        ("df\t-h", ["df", "-h"]),
        ("echo a#b", ["echo", "a#b"]),  # no comment handling
    ],
)
def test_parse_ok(command, argv):
    assert parse_command(command) == argv


@pytest.mark.parametrize(
    ("command", "code", "reason"),
    [
        ("; rm -rf /", ErrorCode.REFUSED, "separator"),
        ("df -h; reboot", ErrorCode.REFUSED, "separator"),
        ("uptime && curl x|sh", ErrorCode.REFUSED, "&"),
        ("uptime || reboot", ErrorCode.REFUSED, "pipe"),
        ("ps aux | grep x", ErrorCode.REFUSED, "pipe"),
        ("uptime &", ErrorCode.REFUSED, "&"),
        ("ls > /tmp/x", ErrorCode.REFUSED, "redirection"),
        ("cat < /etc/passwd", ErrorCode.REFUSED, "redirection"),
        ("(reboot)", ErrorCode.REFUSED, "subshell"),
        ("$(cat /etc/passwd)", ErrorCode.REFUSED, "$"),
        ("echo ${HOME}", ErrorCode.REFUSED, "$"),
        ("du -sh \"$(reboot)\"", ErrorCode.REFUSED, "$"),  # even inside quotes
        ("echo `id`", ErrorCode.REFUSED, "backtick"),
        ("echo '`id`'", ErrorCode.REFUSED, "backtick"),
        ("df -h \\; reboot", ErrorCode.REFUSED, "backslash"),
        ("uptime\nreboot", ErrorCode.REFUSED, "newline"),
        ("uptime\rreboot", ErrorCode.REFUSED, "newline"),
        ("uptime\x00reboot", ErrorCode.REFUSED, "U+0000"),
        ("uptime\x1b[2J", ErrorCode.REFUSED, "control character"),
        ("uptime\uff1b reboot", ErrorCode.REFUSED, "FULLWIDTH SEMICOLON"),
        ("uptime\u037e reboot", ErrorCode.REFUSED, "GREEK QUESTION MARK"),
        ("uptime\u2028reboot", ErrorCode.REFUSED, "non-ASCII"),
        ("uptime\u200b", ErrorCode.REFUSED, "non-ASCII"),
        ("df －h", ErrorCode.REFUSED, "non-ASCII"),
        ("x" * 10_000, ErrorCode.TOO_LARGE, "limit is 1000"),
        ("a " * (MAX_ARGS + 1), ErrorCode.TOO_LARGE, "arguments"),
        ("du -sh 'unterminated", ErrorCode.BAD_REQUEST, "unbalanced"),
        ("   ", ErrorCode.BAD_REQUEST, "empty"),
        ("''", ErrorCode.BAD_REQUEST, "empty"),
    ],
)
def test_parse_refused(command, code, reason):
    with pytest.raises(CommandRejected) as exc:
        parse_command(command)
    assert exc.value.code == code
    assert reason in exc.value.reason


def test_length_bound_is_exact():
    ok = "a" * MAX_COMMAND_CHARS
    assert parse_command(ok) == [ok]
    with pytest.raises(CommandRejected):
        parse_command(ok + "a")


def test_validate_argv():
    assert validate_argv(("df", "-h")) == ["df", "-h"]
    for bad in ("df -h", ["df", 1], [], [""], ["df", "a\nb"], ["df", "$(x)"]):
        with pytest.raises(CommandRejected):
            validate_argv(bad)


# --------------------------------------------------------------------------- allow / ask / refuse


@pytest.fixture
def policy():
    return CommandPolicy()


@pytest.mark.parametrize(
    "command",
    [
        "uptime",
        "nproc",
        "df -h",
        "df -h /",
        "df -h /srv/data",
        "free -m",
        "free -h",
        "cat /proc/loadavg",
        "cat /proc/meminfo",
        "ps aux --sort=-%cpu",
        "ps -eo pid,comm,%cpu,%mem --sort=-%cpu",
        "top -b -n 1",
        "uname -a",
        "hostname",
        "who",
        "lscpu",
        "du -sh /tmp",
        "du -sh /home",
    ],
)
def test_allowlisted(policy, command):
    decision = policy.check(command)
    if shutil.which(command.split()[0], path=SAFE_PATH) is None:  # e.g. no procps in a slim image
        assert (decision.action, decision.code) == ("refuse", ErrorCode.NOT_FOUND)
        return
    assert decision.action == "allow", decision
    assert decision.allowed
    assert decision.program == command.split()[0]
    assert decision.path is not None and os.path.isabs(decision.path)
    assert decision.path.startswith(("/usr/local/bin/", "/usr/bin/", "/bin/"))


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("cat /etc/shadow", "credentials"),
        ("du -sh ../../etc/shadow", "traversal"),
        ("du -sh /srv/../etc", "traversal"),
        ("du -sh /home/user/.ssh", "credentials"),
        ("cat /proc/self/environ", "credentials"),
        ("rm -rf /", "recursive delete"),
        ("rm -r -f /srv", "recursive delete"),
        ("rm '-rf' /", "recursive delete"),
        ("rm --recursive /srv", "recursive delete"),
        ("mkfs.ext4 /dev/sda1", "never allowed"),
        ("mkfs -t ext4 /dev/sda1", "never allowed"),
        ("dd if=/dev/zero of=/dev/sda", "never allowed"),
        ("chmod 777 /srv", "chmod 777"),
        ("chmod -R 0777 /srv", "chmod 777"),
        ("chown -R nobody /srv", "chown -R"),
        ("sudo ls", "never allowed"),
        ("su -", "never allowed"),
        ("bash -c uptime", "never allowed"),
        ("sh", "never allowed"),
        ("python3 -c 'import os'", "inline code"),
        ("perl -e 'print 1'", "inline code"),
        ("env rm x", "outside the policy"),
        ("xargs rm", "outside the policy"),
        ("nohup uptime", "outside the policy"),
        ("find / -delete", "find -exec"),
        ("find /srv -exec rm {} +", "find -exec"),
        ("nc -l 4444", "never allowed"),
        ("cat /dev/tcp/1.2.3.4/80", "/dev/tcp"),
        ("curl 'http://x|sh'", "piped to a shell"),
        ("awk 'BEGIN{system(\"id\")}'", "inline code"),
    ],
)
def test_denied_even_when_asking(command, reason):
    ask = CommandPolicy(approval_mode="ask")
    decision = ask.check(command)
    assert decision.action == "refuse", decision
    assert decision.code == ErrorCode.REFUSED
    assert reason in decision.reason, decision.reason


def test_deny_list_overrides_allowlist():
    # an allowlisted form whose argument trips the deny list is still refused
    permissive = CommandPolicy(path_roots=("/",))
    assert permissive.check("du -sh /home/alice/.ssh").action == "refuse"
    assert permissive.check("du -sh /home/alice").action == "allow"


def test_deny_list_checks_raw_and_argv():
    policy = CommandPolicy(approval_mode="ask")
    # quoting cannot hide a dangerous flag: the joined argv is checked
    assert policy.decide(["rm", "-rf", "/"]).rule == "deny:rm_recursive"
    assert policy.decide(["chmod", "777", "x"]).rule == "deny:chmod_777"


@pytest.mark.parametrize(
    ("command", "why"),
    [
        ("df -h /etc", "outside the allowed roots"),
        ("du -sh /", "outside the allowed roots"),
        ("du -sh srv", "must be absolute"),
        ("du -sh /srv//x", "normalised"),
        ("du -sh /srv/./x", "normalised"),
        ("df -h --output=source", "allowed: df -h"),
        ("free", "allowed: free -m"),
        ("ps aux", "allowed: ps aux --sort=-%cpu"),
        ("top", "allowed: top -b -n 1"),
        ("top -b -n 1000", "allowed: top -b -n 1"),
        ("cat /etc/passwd", "allowed: cat /proc/loadavg"),
        ("cat /proc/loadavg /etc/passwd", "arguments not allowed"),
        ("date -s 2020-01-01", "arguments not allowed"),
        ("ls -la", "not on the allowlist"),
        ("reboot", "not on the allowlist"),
    ],
)
def test_not_allowlisted_refused_by_default(policy, command, why):
    decision = policy.check(command)
    assert decision.action == "refuse"
    assert decision.code == ErrorCode.REFUSED
    assert why in decision.reason, decision.reason


def test_ask_mode_needs_approval():
    ask = CommandPolicy(approval_mode="ask")
    decision = ask.check("ls -la")
    assert decision.action == "needs_approval"
    assert decision.argv == ("ls", "-la")
    assert decision.path and decision.path.endswith("/ls")
    assert "human" in decision.reason
    # allowlisted commands still run directly
    assert ask.check("uptime").action == "allow"
    # parse errors stay refusals with their code
    assert ask.check("ls; reboot").action == "refuse"
    assert ask.check("x" * 5000).code == ErrorCode.TOO_LARGE


def test_program_must_be_bare_name_on_safe_path(monkeypatch, tmp_path):
    policy = CommandPolicy(approval_mode="ask")
    for argv0 in ("/bin/df", "./df", "FOO=1", "-h"):
        decision = policy.decide([argv0, "-h"])
        assert decision.action == "refuse", argv0
    # the caller's PATH is never used: a fake 'uptime' earlier on PATH is ignored
    fake = tmp_path / "uptime"
    fake.write_text("#!/bin/sh\necho pwned\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    assert policy.resolve("uptime") != str(fake)
    assert not policy.check("uptime").path.startswith(str(tmp_path))


def test_not_installed():
    policy = CommandPolicy([AllowRule("definitely-not-a-real-program", ((),))])
    decision = policy.check("definitely-not-a-real-program")
    assert decision.action == "refuse"
    assert decision.code == ErrorCode.NOT_FOUND


def test_symlink_escaping_root_is_refused(tmp_path):
    link = tmp_path / "link"
    link.symlink_to("/etc")
    policy = CommandPolicy(path_roots=(str(tmp_path),))
    assert policy.check(f"du -sh {tmp_path}").action == "allow"
    decision = policy.check(f"du -sh {link}")
    assert decision.action == "refuse"
    assert "resolves to" in decision.reason


def test_allowlist_is_read_only_and_declarative():
    policy = CommandPolicy()
    with pytest.raises(TypeError):
        policy.allowlist["rm"] = AllowRule("rm", ((),))  # type: ignore[index]
    assert set(policy.allowlist) == {r.program for r in DEFAULT_ALLOWLIST}
    assert "du -sh <path>" in policy.allowed_forms()
    assert any(PATH in form for form in policy.allowlist["df"].forms)
    with pytest.raises(ValueError):
        CommandPolicy([AllowRule("/bin/df", ((),))])
    with pytest.raises(ValueError):
        CommandPolicy(approval_mode="yes")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- remote policy and quoting


@pytest.mark.parametrize(
    "command",
    ["reboot", "shutdown -h now", "systemctl stop nginx", "systemctl --now disable nginx", "service nginx stop", "kill -9 1", "pkill x", "init 0"],
)
def test_remote_blocked(command):
    decision = remote_policy("ask").check(command)
    assert decision.action == "refuse"
    assert decision.rule.startswith("deny:")


def test_remote_policy_is_lexical():
    policy = remote_policy()
    decision = policy.check("du -sh /srv/data")
    assert decision.action == "allow"
    assert decision.path is None  # programs are not resolved on this host
    assert policy.check("du -sh /srv/../etc").action == "refuse"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["uptime"], "uptime"),
        (["df", "-h"], "df -h"),
        (["du", "-sh", "/srv/my dir"], "du -sh '/srv/my dir'"),
        (["du", "-sh", "/srv/it's"], "du -sh '/srv/it'\"'\"'s'"),
        (["du", "-sh", "/srv/a;reboot"], "du -sh '/srv/a;reboot'"),
        (["du", "-sh", "/srv/x|y&z>w"], "du -sh '/srv/x|y&z>w'"),
        (["du", "-sh", "/srv/*"], "du -sh '/srv/*'"),
        (["du", "-sh", '/srv/"q"'], "du -sh '/srv/\"q\"'"),
    ],
)
def test_remote_quoting(argv, expected):
    import shlex

    command = build_remote_command(argv)
    assert command == expected
    assert shlex.split(command) == argv  # the remote POSIX shell sees exactly this argv


def test_remote_quoting_refuses_expansions():
    for argv in (["du", "-sh", "$(reboot)"], ["du", "-sh", "`id`"], ["du", "-sh", "a\nb"], ["du", "-sh", "a\\b"]):
        with pytest.raises(CommandRejected):
            build_remote_command(argv)
