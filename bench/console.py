"""Web console benchmark: what the browser adds on top of the API. On the distributed system (as `make up` runs
it), one fast-tier question at a time:

  raw      POST /v1/ask with "stream": true read by httpx: time to the first `step` event and to the `answer` event
  console  the same question typed into the console in headless Chromium (Debian's, driven by Playwright): time
           from the form's submit to the first route node drawn and to the finished turn, timed inside the page

plus the page's own load (navigation to DOMContentLoaded and to load, requests and bytes). Needs Chromium
(`make chromium`).

    .venv/bin/python bench/console.py [--questions 30]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT.parent))

import httpx  # noqa: E402
from _common import NO_RATE_LIMIT, machine, summary_ms  # noqa: E402
from meshward.devstack.launcher import Console, Stack  # noqa: E402
from meshward.devstack.nats_server import free_port  # noqa: E402

from tests.browser import chromium_executable  # noqa: E402

QUESTION = "Calculate 15 * 23 + 7"
ASK_TIMEOUT_S = 60

# Submits the question and resolves with [ms to the first route node, ms to the finished turn], measured with
# performance.now() in the page (no driver round trips inside the interval).
TIMED_ASK = """(question) => new Promise((resolve, reject) => {
  const conversation = document.getElementById('conversation');
  const before = conversation.querySelectorAll('article.turn').length;
  let firstStep = null;
  const t0 = performance.now();
  const observer = new MutationObserver(() => {
    const turn = conversation.querySelectorAll('article.turn')[before];
    if (!turn) return;
    if (firstStep === null && turn.querySelector('ol.route li.done')) firstStep = performance.now() - t0;
    const state = turn.dataset.state;
    if (state && state !== 'running') {
      observer.disconnect();
      if (state !== 'answered') reject(new Error(`turn ended ${state}`));
      else resolve([firstStep, performance.now() - t0]);
    }
  });
  observer.observe(conversation, { subtree: true, childList: true, attributes: true, characterData: true });
  document.getElementById('question').value = question;
  document.getElementById('ask-form').requestSubmit();
})"""


async def raw(url: str, n: int) -> tuple[list[float], list[float]]:
    first, done = [], []
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        for _ in range(n):
            t0 = time.perf_counter()
            seen_step = None
            async with http.stream("POST", "/v1/ask", json={"question": QUESTION, "stream": True}) as r:
                event = None
                async for line in r.aiter_lines():
                    if line.startswith("event:"):
                        event = line[6:].strip()
                        if event == "step" and seen_step is None:
                            seen_step = time.perf_counter() - t0
                    elif line.startswith("data:") and event == "answer":
                        assert "352" in json.loads(line[5:])["answer"]
                        done.append(time.perf_counter() - t0)
            first.append(seen_step)
    return first, done


async def console(url: str, n: int) -> tuple[list[float], list[float], dict]:
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=chromium_executable())
        page = await browser.new_page()
        await page.goto(url + "/")
        await page.wait_for_selector('#health[data-state="ok"]')
        load = await page.evaluate("""() => {
            const nav = performance.getEntriesByType('navigation')[0];
            const res = performance.getEntriesByType('resource').filter((r) => r.name.includes('/console/'));
            return { dom_ms: nav.domContentLoadedEventEnd, load_ms: nav.loadEventEnd, requests: 1 + res.length,
                     bytes: nav.transferSize + res.reduce((a, r) => a + r.transferSize, 0) };
        }""")
        first, done = [], []
        for i in range(n):
            if i % 10 == 0:
                await page.click("#new-thread")  # keep the page from growing without bound over the run
            await page.wait_for_selector("#send:not([disabled])")  # the previous stream has closed
            step_ms, done_ms = await asyncio.wait_for(page.evaluate(TIMED_ASK, QUESTION), ASK_TIMEOUT_S)
            first.append(step_ms / 1000)
            done.append(done_ms / 1000)
        await browser.close()
    return first, done, load


async def run(n: int) -> None:
    data = Path(tempfile.mkdtemp(prefix="meshward-bench-console-"))
    port = free_port()
    env = {"MESHWARD_LOG_LEVEL": "WARNING", "MESHWARD_MCP_PORT": str(free_port()), **NO_RATE_LIMIT}
    with tempfile.TemporaryFile("w+") as log:
        stack = Stack(data, port, None, Console(log), extra_env=env)
        await stack.start()
        try:
            assert await stack.wait_healthy(), "the system did not become healthy"
            url = f"http://127.0.0.1:{port}"
            print(f"system up at {url}; {n} questions over raw SSE", file=sys.stderr, flush=True)
            await raw(url, 5)  # warm-up: classifiers, caches, connections
            raw_first, raw_done = await raw(url, n)
            print(f"{n} questions through the console in Chromium", file=sys.stderr, flush=True)
            con_first, con_done, load = await console(url, n)
        finally:
            await stack.stop()
            shutil.rmtree(data, ignore_errors=True)
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.1f} at the end")
    print(f"question: {QUESTION!r} (fast tier), {n} in a row each way; browser: {chromium_executable()}")
    print(f"{'':34} {'p50 ms':>8} {'p99 ms':>8} {'mean ms':>8}")
    rows = (("raw SSE, first step", raw_first), ("console, first route node drawn", con_first),
            ("raw SSE, answer event", raw_done), ("console, turn finished", con_done))
    stats = {name: summary_ms(samples) for name, samples in rows}
    for name, s in stats.items():
        print(f"{name:34} {s['p50']:8.1f} {s['p99']:8.1f} {s['mean']:8.1f}")
    a, b = stats["console, turn finished"], stats["raw SSE, answer event"]
    print(f"ratio console/raw to the answer: p50 {a['p50'] / b['p50']:.2f}x, mean {a['mean'] / b['mean']:.2f}x "
          f"(+{a['p50'] - b['p50']:.1f} ms at p50)")
    print(f"page load: DOMContentLoaded {load['dom_ms']:.0f} ms, load {load['load_ms']:.0f} ms, "
          f"{load['requests']} requests, {load['bytes']} bytes")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--questions", type=int, default=30)
    args = p.parse_args()
    if chromium_executable() is None:
        sys.exit("no Chromium: run `make chromium` or set MESHWARD_CHROMIUM")
    asyncio.run(run(args.questions))


if __name__ == "__main__":
    main()
