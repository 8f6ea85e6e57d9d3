"""remote_cli against a real asyncssh server on 127.0.0.1 (started in the test, with generated keys).

The fake server never runs anything: it parses the received command with shlex and answers a tiny canned
set (uptime, df -h, du -sh <path>, ...), records every connection, session and command string.
"""
from __future__ import annotations

import asyncio
import shlex
from dataclasses import dataclass, field

import asyncssh
import pytest
from meshward.contracts import ErrorCode
from meshward.tools.registry import ToolError, ToolRegistry
from meshward.tools.remote import (
    RemoteHost,
    RemoteSettings,
    check_remote_command,
    remote_tools,
    run_remote_approved,
)
from pydantic import ValidationError

pytestmark = pytest.mark.integration

CANNED = {
    ("uptime",): " 10:00:00 up 42 days,  3:14,  1 user,  load average: 0.01, 0.05, 0.10\n",
    ("df", "-h"): "Filesystem      Size  Used Avail Use% Mounted on\n/dev/vda1        50G   20G   30G  40% /\n",
    ("nproc",): "8\n",
}


@dataclass
class FakeSSH:
    port: int
    client_key_path: str
    known_hosts_path: str
    host_key: asyncssh.SSHKey
    connections: int = 0
    sessions: int = 0
    commands: list[str] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    def settings(self, **overrides) -> RemoteSettings:
        values = {
            "hosts": {"box": RemoteHost(host="127.0.0.1", port=self.port, username="diag", client_key=self.client_key_path)},
            "known_hosts": self.known_hosts_path,
            "connect_timeout_s": 2.0,
            "timeout_s": 1.5,
            "max_output_bytes": 65_536,
        }
        values.update(overrides)
        return RemoteSettings(**values)


def write_key(key: asyncssh.SSHKey, path) -> str:
    key.write_private_key(str(path))
    path.chmod(0o600)
    return str(path)


@pytest.fixture
async def fake_ssh(tmp_path):
    host_key = asyncssh.generate_private_key("ssh-ed25519")
    client_key = asyncssh.generate_private_key("ssh-ed25519")
    state: dict[str, FakeSSH] = {}

    class Server(asyncssh.SSHServer):
        def connection_made(self, conn):
            state["fake"].connections += 1

    async def handle(process: asyncssh.SSHServerProcess) -> None:
        fake = state["fake"]
        fake.sessions += 1
        fake.commands.append(process.command)
        try:
            argv = tuple(shlex.split(process.command or ""))
        except ValueError:
            argv = ()
        if argv in CANNED:
            process.stdout.write(CANNED[argv])
            process.exit(0)
        elif argv[:2] == ("du", "-sh") and len(argv) == 3:
            process.stdout.write(f"4.0K\t{argv[2]}\n")
            process.exit(0)
        elif argv == ("ps", "aux", "--sort=-%cpu"):  # far more output than the cap
            process.stdout.write(("root 1 0.0 0.1 " + "x" * 64 + "\n") * 4000)  # one write: the loop is shared
            process.exit(0)
        elif argv == ("top", "-b", "-n", "1"):  # hangs until the test ends
            try:
                await asyncio.wait_for(fake.release.wait(), 30)
            except TimeoutError:
                pass
            process.exit(0)
        else:
            process.stderr.write(f"fake: {argv[0] if argv else '?'}: command not found\n")
            process.exit(127)

    server = await asyncssh.listen(
        "127.0.0.1",
        0,
        server_factory=Server,
        server_host_keys=[host_key],
        authorized_client_keys=asyncssh.import_authorized_keys(client_key.export_public_key().decode()),
        process_factory=handle,
    )
    port = server.get_port()
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(f"[127.0.0.1]:{port} {host_key.export_public_key().decode()}")
    fake = FakeSSH(
        port=port,
        client_key_path=write_key(client_key, tmp_path / "client_key"),
        known_hosts_path=str(known_hosts),
        host_key=host_key,
    )
    state["fake"] = fake
    yield fake
    fake.release.set()
    server.close()
    await server.wait_closed()


def registry_for(settings: RemoteSettings) -> ToolRegistry:
    registry = ToolRegistry()
    for tool in remote_tools(settings):
        registry.register(tool)
    return registry


async def call(settings: RemoteSettings, host: str, command: str, approved: bool = True):
    # every remote command needs a human: the tests of what runs call it as the supervisor does after an approval
    result = await registry_for(settings).call("remote_cli", {"host": host, "command": command}, approved=approved)
    text, data = result.content
    return text.text, data.data


# --------------------------------------------------------------------------- allowed commands


async def test_allowed_command_runs(fake_ssh):
    text, data = await call(fake_ssh.settings(), "box", "uptime")
    assert "load average" in text
    assert data == {**data, "host": "box", "argv": ["uptime"], "exit_code": 0, "truncated": False}
    assert fake_ssh.sessions == 1
    assert fake_ssh.commands == ["uptime"]

    text, data = await call(fake_ssh.settings(), "box", "df -h")
    assert "Filesystem" in text
    assert fake_ssh.commands[-1] == "df -h"


@pytest.mark.parametrize(
    ("command", "sent", "path"),
    [
        ("du -sh '/srv/my dir'", "du -sh '/srv/my dir'", "/srv/my dir"),
        ('du -sh "/srv/it\'s"', "du -sh '/srv/it'\"'\"'s'", "/srv/it's"),
        ('du -sh "/srv/a;b&c"', "du -sh '/srv/a;b&c'", "/srv/a;b&c"),
        ('du -sh "/srv/x|y>z"', "du -sh '/srv/x|y>z'", "/srv/x|y>z"),
    ],
)
async def test_arguments_are_quoted_for_the_remote_shell(fake_ssh, command, sent, path):
    text, data = await call(fake_ssh.settings(), "box", command)
    assert fake_ssh.commands == [sent]
    assert shlex.split(fake_ssh.commands[0]) == ["du", "-sh", path]
    assert text.startswith(f"4.0K\t{path}")
    assert data["argv"] == ["du", "-sh", path]


async def test_nonzero_exit_is_reported(fake_ssh):
    text, data = await call(fake_ssh.settings(), "box", "hostname")
    assert data["exit_code"] == 127
    assert "[stderr]" in text and "command not found" in text


async def test_output_is_capped(fake_ssh):
    text, data = await call(fake_ssh.settings(max_output_bytes=4096, timeout_s=10.0), "box", "ps aux --sort=-%cpu")
    assert data["truncated"] is True
    assert len(text.encode()) <= 4096 + 100
    assert "[output truncated: 4096 bytes" in text


# --------------------------------------------------------------------------- refusals never reach the server


@pytest.mark.parametrize(
    ("command", "code"),
    [
        ("rm -rf /", ErrorCode.REFUSED),
        ("reboot", ErrorCode.REFUSED),
        ("shutdown -h now", ErrorCode.REFUSED),
        ("systemctl stop nginx", ErrorCode.REFUSED),
        ("kill -9 1", ErrorCode.REFUSED),
        ("df -h; reboot", ErrorCode.REFUSED),
        ("uptime && curl x|sh", ErrorCode.REFUSED),
        ("$(cat /etc/passwd)", ErrorCode.REFUSED),
        ("cat /etc/shadow", ErrorCode.REFUSED),
        ("du -sh ../../etc", ErrorCode.REFUSED),
        ("du -sh /etc", ErrorCode.NEEDS_APPROVAL),
        ("ls -la", ErrorCode.NEEDS_APPROVAL),
        ("uptime\nreboot", ErrorCode.REFUSED),
        ("uptime", ErrorCode.NEEDS_APPROVAL),  # allowlisted, but on another machine: a human approves each call
        ("x" * 5000, ErrorCode.TOO_LARGE),
    ],
)
async def test_denied_or_unapproved_command_never_reaches_the_server(fake_ssh, command, code):
    with pytest.raises(ToolError) as exc:
        await call(fake_ssh.settings(approval_mode="ask"), "box", command, approved=False)
    assert exc.value.code == code
    assert fake_ssh.connections == 0
    assert fake_ssh.sessions == 0


async def test_needs_approval_in_ask_mode_then_approved_path(fake_ssh):
    settings = fake_ssh.settings(approval_mode="ask")
    with pytest.raises(ToolError) as exc:
        await call(settings, "box", "ls -la", approved=False)
    assert exc.value.message.startswith("needs human approval")
    assert fake_ssh.connections == 0

    decision = check_remote_command("box", "ls -la", settings)
    assert decision.action == "needs_approval"
    _text, data = await run_remote_approved("box", decision.argv, settings)
    assert fake_ssh.commands == ["ls -la"]
    assert data.data["exit_code"] == 127  # the fake knows no ls; what matters is that it was sent

    with pytest.raises(ToolError):
        await run_remote_approved("box", ["reboot"], settings)
    with pytest.raises(ToolError) as exc:
        await run_remote_approved("box", ["ls", "-la"], fake_ssh.settings())  # approval_mode=deny
    assert exc.value.code == ErrorCode.REFUSED
    assert fake_ssh.sessions == 1


@pytest.mark.parametrize(
    ("host", "code"),
    [
        ("prod", ErrorCode.NOT_FOUND),
        ("127.0.0.1", ErrorCode.NOT_FOUND),
        ("evil.example.com", ErrorCode.NOT_FOUND),
        ("diag@127.0.0.1:22", ErrorCode.BAD_REQUEST),
        ("box; reboot", ErrorCode.BAD_REQUEST),
    ],
)
async def test_unknown_alias(fake_ssh, host, code):
    with pytest.raises(ToolError) as exc:
        await call(fake_ssh.settings(), host, "uptime")
    assert exc.value.code == code
    assert fake_ssh.connections == 0
    assert check_remote_command(host, "uptime", fake_ssh.settings()).code == ErrorCode.NOT_FOUND


# --------------------------------------------------------------------------- host keys and auth


async def test_wrong_host_key_is_refused(fake_ssh, tmp_path):
    impostor = asyncssh.generate_private_key("ssh-ed25519")
    known_hosts = tmp_path / "other_known_hosts"
    known_hosts.write_text(f"[127.0.0.1]:{fake_ssh.port} {impostor.export_public_key().decode()}")
    with pytest.raises(ToolError) as exc:
        await call(fake_ssh.settings(known_hosts=str(known_hosts)), "box", "uptime")
    assert exc.value.code == ErrorCode.REFUSED
    assert "host key" in exc.value.message
    assert fake_ssh.sessions == 0


async def test_host_missing_from_known_hosts_is_refused(fake_ssh, tmp_path):
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    with pytest.raises(ToolError) as exc:
        await call(fake_ssh.settings(known_hosts=str(empty)), "box", "uptime")
    assert exc.value.code == ErrorCode.REFUSED
    assert fake_ssh.sessions == 0
    with pytest.raises(ToolError) as exc:
        await call(fake_ssh.settings(known_hosts=str(tmp_path / "missing")), "box", "uptime")
    assert exc.value.code == ErrorCode.REFUSED
    assert fake_ssh.connections == 1  # the missing file stopped the second call before connecting


async def test_auth_failure_is_refused(fake_ssh, tmp_path):
    stranger = write_key(asyncssh.generate_private_key("ssh-ed25519"), tmp_path / "stranger")
    host = RemoteHost(host="127.0.0.1", port=fake_ssh.port, username="diag", client_key=stranger)
    with pytest.raises(ToolError) as exc:
        await call(fake_ssh.settings(hosts={"box": host}), "box", "uptime")
    assert exc.value.code == ErrorCode.REFUSED
    assert "authentication" in exc.value.message
    assert fake_ssh.sessions == 0


# --------------------------------------------------------------------------- unreachable and slow


async def test_server_that_never_answers(tmp_path):
    accepted = []
    hung_up = asyncio.Event()

    async def silent(reader, writer):
        accepted.append(writer)
        await reader.read()  # swallow the client's SSH banner, never answer; returns once the client hangs up
        hung_up.set()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    key_path = write_key(asyncssh.generate_private_key("ssh-ed25519"), tmp_path / "k")
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("")
    settings = RemoteSettings(
        hosts={"mute": RemoteHost(host="127.0.0.1", port=port, username="diag", client_key=key_path)},
        known_hosts=str(known_hosts),
        connect_timeout_s=1.0,
    )
    try:
        with pytest.raises(ToolError) as exc:
            await asyncio.wait_for(call(settings, "mute", "uptime"), timeout=30)  # hang guard only
        # cut by connect_timeout_s, not by the registry's own deadline (connect + command + 5 s = 16 s)
        assert exc.value.code == ErrorCode.UNAVAILABLE
        assert "'mute' did not complete the SSH handshake within 1s" in exc.value.message
        assert len(accepted) == 1  # TCP connected, once: the SSH handshake is what never finished
        await asyncio.wait_for(hung_up.wait(), timeout=30)  # and the client gave up on it: the socket was closed
    finally:
        for writer in accepted:
            writer.close()
        server.close()
        await server.wait_closed()


async def test_command_that_never_finishes(fake_ssh):
    with pytest.raises(ToolError) as exc:  # (wait_for: a hang guard only)
        await asyncio.wait_for(call(fake_ssh.settings(timeout_s=1.0), "box", "top -b -n 1"), timeout=30)
    assert exc.value.code == ErrorCode.DEADLINE_EXCEEDED
    # cut by the command's timeout_s, not by the registry's own deadline (connect + command + 5 s = 8 s)
    assert exc.value.message == "top on 'box' did not finish within 1s. No output before the deadline."
    assert not fake_ssh.release.is_set()  # the remote command was still hanging: it did not end on its own
    assert fake_ssh.sessions == 1


async def test_unreachable_is_unavailable(fake_ssh):
    probe = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = probe.sockets[0].getsockname()[1]
    probe.close()
    await probe.wait_closed()
    host = RemoteHost(host="127.0.0.1", port=port, username="diag", client_key=fake_ssh.client_key_path)
    with pytest.raises(ToolError) as exc:
        await call(fake_ssh.settings(hosts={"box": host}), "box", "uptime")
    assert exc.value.code == ErrorCode.UNAVAILABLE


async def test_unusable_client_key_is_unavailable(fake_ssh, tmp_path):
    bad = tmp_path / "bad_key"
    bad.write_text("not a key")
    host = RemoteHost(host="127.0.0.1", port=fake_ssh.port, username="diag", client_key=str(bad))
    with pytest.raises(ToolError) as exc:
        await call(fake_ssh.settings(hosts={"box": host}), "box", "uptime")
    assert exc.value.code == ErrorCode.UNAVAILABLE
    assert fake_ssh.connections == 0


# --------------------------------------------------------------------------- settings and spec


def test_settings_require_known_hosts(monkeypatch, tmp_path):
    host = {"host": "10.0.0.5", "username": "diag", "client_key": str(tmp_path / "k")}
    with pytest.raises(ValidationError, match="KNOWN_HOSTS"):
        RemoteSettings(hosts={"web": host})
    with pytest.raises(ValidationError):
        RemoteSettings(hosts={"bad alias!": host}, known_hosts=str(tmp_path / "kh"))
    assert RemoteSettings().hosts == {}  # nothing configured is fine: every call is then not_found

    monkeypatch.setenv("MESHWARD_SSH_HOSTS", '{"web1": {"host": "10.0.0.5", "port": 2222, "username": "diag", "client_key": "/k"}}')
    monkeypatch.setenv("MESHWARD_SSH_KNOWN_HOSTS", str(tmp_path / "kh"))
    monkeypatch.setenv("MESHWARD_SSH_CONNECT_TIMEOUT_S", "3")
    settings = RemoteSettings()
    assert settings.hosts["web1"].port == 2222
    assert settings.connect_timeout_s == 3.0


def test_remote_tool_spec(fake_ssh):
    (tool,) = remote_tools(fake_ssh.settings())
    assert tool.name == "remote_cli"
    assert tool.requires_approval is False
    schema = tool.spec().input_schema
    assert set(schema["properties"]) == {"host", "command"}
    assert "box" in tool.description
