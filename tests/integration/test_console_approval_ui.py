"""The console's approval card against the approval API (README: Approvals) in headless Chromium.

The server here is a stand-in that speaks only that contract: `/v1/ask` streams `step`, `approval` and an
`awaiting_approval` answer; `POST /v1/threads/{id}/approval` answers once with the final response, then 409. It
tests the page's logic (what it draws, what it sends, how it treats 409), not the graph: the same flows against
the real approval path are tests/e2e/test_console_browser.py's approval tests, which run once that path exists."""
from __future__ import annotations

import asyncio
import json
import re
from datetime import UTC, datetime, timedelta

import pytest
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from meshward.devstack.nats_server import free_port
from meshward.supervisor.console import router
from sse_starlette import EventSourceResponse

from tests.browser import launch_chromium

pytestmark = pytest.mark.integration

APPROVAL = {"approval_id": "ap-1", "tool": "cli_execute", "arguments": {"command": "printf %s-%s console approved"},
            "reason": "'printf' is not on the allowlist; a human must approve it"}


def response(thread_id: str, status: str, answer: str, **extra) -> dict:
    return {"status": status, "answer": answer, "refusal_reason": None, "threat_category": None, "intent": "diagnostics",
            "decided_by": "none", "route": ["security", "intent", "assess", "retrieve", "reason"], "tools_used": [],
            "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "thread_id": thread_id, "duration_ms": 5.0, "request_id": "r-1",
            "steps": [], "images": [], "tier": "deep", "tier_reason": "open question", "model": "fake/model", "confidence": None,
            "usage": {"prompt_tokens": 1, "completion_tokens": 1}, "withheld": [], **extra}


class SeamServer:
    def __init__(self, expires_in_s: float = 300):
        self.pending: dict[str, dict] = {}
        self.questions: dict[str, str] = {}
        self.decisions: list[tuple[str, dict, dict]] = []  # (thread, body, headers)
        self.expires_in_s = expires_in_s
        app = FastAPI()
        app.include_router(router)

        @app.get("/healthz")
        async def healthz():
            return {"status": "ok", "missing": [], "services": {}}

        @app.post("/v1/ask")
        async def ask(request: Request):
            body = await request.json()
            thread_id = body["thread_id"]
            self.questions[thread_id] = body["question"]
            approval = {**APPROVAL, "expires_at": (datetime.now(UTC) + timedelta(seconds=self.expires_in_s)).isoformat()}
            self.pending[thread_id] = approval

            async def events():
                for node, nxt in (("security", "intent"), ("intent", "assess"), ("assess", "retrieve"), ("retrieve", "reason")):
                    yield {"event": "step", "data": json.dumps({"node": node, "ms": 1.0, "next": nxt})}
                yield {"event": "approval", "data": json.dumps(approval)}
                yield {"event": "answer", "data": json.dumps(response(thread_id, "awaiting_approval", "Waiting for approval of cli_execute.", approval=approval))}

            return EventSourceResponse(events())

        @app.get("/v1/threads/{thread_id}/history")
        async def history(thread_id: str):
            turns = [{"question": self.questions[thread_id], "answer": "Waiting for approval of cli_execute.", "status": "awaiting_approval",
                      "at": datetime.now(UTC).isoformat(), "event_id": "e-1"}] if thread_id in self.questions else []
            return {"thread_id": thread_id, "turns": turns}

        @app.post("/v1/threads/{thread_id}/approval")
        async def decide(thread_id: str, request: Request):
            body = await request.json()
            self.decisions.append((thread_id, body, dict(request.headers)))
            if self.pending.pop(thread_id, None) is None:
                return JSONResponse(status_code=409, content={"error": {"code": "no_pending_approval", "message": "no approval is pending on this thread", "details": []}})
            if body["approved"]:
                return response(thread_id, "answered", "It printed console-approved.", tools_used=["cli_execute"],
                                route=["security", "intent", "assess", "retrieve", "reason", "validate", "output_check"])
            return response(thread_id, "answered", "The command was denied, so it did not run.",
                            route=["security", "intent", "assess", "retrieve", "reason", "validate", "output_check"])

        self.app = app


@pytest.fixture(scope="module")
async def browser():
    playwright, browser = await launch_chromium()
    yield browser
    await browser.close()
    await playwright.stop()


@pytest.fixture
async def seam():
    server = SeamServer()
    port = free_port()
    uv = uvicorn.Server(uvicorn.Config(server.app, host="127.0.0.1", port=port, log_level="warning"))
    task = asyncio.create_task(uv.serve())
    while not uv.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)  # polling uvicorn's own readiness flag
    server.url = f"http://127.0.0.1:{port}"
    yield server
    uv.should_exit = True
    await task


@pytest.fixture
async def page(browser, seam):
    from playwright.async_api import expect

    context = await browser.new_context()
    page = await context.new_page()
    problems = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" and "409" not in m.text else None)
    await page.goto(seam.url + "/")
    await page.fill("#question", "Why would load average be high while CPU usage is low?")
    await page.press("#question", "Enter")
    await expect(page.locator("article.turn")).to_have_attribute("data-state", "awaiting_approval")
    yield page
    await context.close()
    assert problems == []


async def test_the_card_shows_the_request_and_approving_draws_the_answer(page, seam):
    from playwright.async_api import expect

    card = page.locator("section.approval")
    await expect(card.locator("h3")).to_have_text("Approval needed: cli_execute")
    await expect(card.locator(".approval-reason")).to_have_text(APPROVAL["reason"])
    assert json.loads(await card.locator(".approval-arguments").text_content()) == APPROVAL["arguments"]
    await expect(card.locator(".countdown")).to_have_text(re.compile(r"^\(in [0-4]:[0-5]\d\)$"))
    await expect(page.locator("#thread-list .badge")).to_have_text("approval pending")
    await page.evaluate("() => localStorage.setItem('meshward.console.apiKey', 'k-123')")

    await card.locator("button.approve").click()
    await expect(card).to_have_attribute("data-state", "approved")
    await expect(page.locator("article.turn .answer-text")).to_have_text("It printed console-approved.")
    await expect(page.locator("article.turn")).to_have_attribute("data-state", "answered")
    await expect(page.locator('dd[data-key="tools"]')).to_have_text("cli_execute")
    await expect(page.locator("#thread-list .badge")).to_have_count(0)
    await expect(card.locator("button.approve")).to_be_disabled()
    thread_id = await page.locator("#thread-list li").get_attribute("data-thread-id")
    ((decided_thread, body, headers),) = seam.decisions
    assert decided_thread == thread_id and body == {"approved": True} and headers["x-api-key"] == "k-123"
    assert "actor" not in body  # the server fills it from the caller's principal


async def test_denying_sends_the_reason(page, seam):
    from playwright.async_api import expect

    card = page.locator("section.approval")
    await card.get_by_label("Reason (optional)").fill("not on this host")
    await card.locator("button.deny").click()
    await expect(card).to_have_attribute("data-state", "denied")
    await expect(page.locator("article.turn .answer-text")).to_have_text("The command was denied, so it did not run.")
    assert [d[1] for d in seam.decisions] == [{"approved": False, "reason": "not on this host"}]


async def test_a_request_decided_elsewhere_shows_no_longer_pending(page, seam):
    from playwright.async_api import expect

    seam.pending.clear()  # decided in another tab, or expired on the server
    card = page.locator("section.approval")
    await card.locator("button.approve").click()
    await expect(card).to_have_attribute("data-state", "gone")
    await expect(card.locator(".decision")).to_contain_text("No longer pending: no approval is pending on this thread")
    await expect(page.locator("#thread-list .badge")).to_have_count(0)


async def test_a_pending_request_comes_back_with_its_thread(page, seam):
    from playwright.async_api import expect

    await page.reload()
    await expect(page.locator("#conversation article")).to_have_count(0)
    await expect(page.locator("#thread-list .badge")).to_have_text("approval pending")
    await page.locator(".thread-open").click()
    await expect(page.locator("article.turn-past .question-text")).to_have_text("Why would load average be high while CPU usage is low?")
    card = page.locator("section.approval")
    await expect(card.locator(".approval-tool")).to_have_text("cli_execute")
    await card.locator("button.approve").click()
    await expect(card).to_have_attribute("data-state", "approved")
    await expect(page.locator("article.turn:not(.turn-past) .answer-text")).to_have_text("It printed console-approved.")
    assert [d[1] for d in seam.decisions] == [{"approved": True}]
