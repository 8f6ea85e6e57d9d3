"""`meshward ask` shows a pending approval and `meshward approve` decides it, over a real socket (agents in-process,
the scripted model asks for a command the tools policy sends to a human), with the API key from the environment."""
from __future__ import annotations

import asyncio
import re

import pytest
from meshward.devstack.cli import main as meshward

from tests.integration.test_auth_http import CI_KEY, settings_for
from tests.served import serve
from tests.unit.supervisor.fakes import FakePorts, reply

pytestmark = pytest.mark.integration


async def test_ask_shows_the_pending_approval_and_approve_continues_the_run(tmp_path, capsys, monkeypatch):
    ports = FakePorts(intent="diagnostics", tools=("cli_execute",), needs_approval={"cli_execute"},
                      chat=[reply(tool_calls=[("c1", "cli_execute", {"command": "lsof -p 1"})]), *[reply("The journal holds the open files.")] * 3])
    settings = settings_for(tmp_path)
    monkeypatch.setenv("MESHWARD_API_KEY", CI_KEY)
    async with serve(settings, ports) as http:
        url = str(http.base_url).rstrip("/")
        assert await asyncio.to_thread(meshward, ["ask", "Why is the disk busy? Check the open files of process 1.", "--url", url]) == 0
        out = capsys.readouterr().out
        assert "waiting for approval: cli_execute" in out and "lsof -p 1" in out and "awaiting_approval" in out
        thread = re.search(r"meshward approve (\S+)", out).group(1)
        assert await asyncio.to_thread(meshward, ["approve", thread, "--url", url, "--reason", "checked"]) == 0
        out = capsys.readouterr().out
        assert "The journal holds the open files." in out and "answered" in out
        assert [(n, actor) for n, _, _, actor in ports.approved_calls] == [("cli_execute", "ci")]  # the key's name
        assert await asyncio.to_thread(meshward, ["approve", thread, "--url", url]) == 1  # nothing pending any more
        assert "no pending approval" in capsys.readouterr().err
