"""The web console's page and modules over a real HTTP socket (uvicorn, in-process graph): content types,
the Content-Security-Policy, caching, 404s, no inline script, no HTML sinks, and the files in the wheel; then
the modules' own logic (event-stream parser, image check, text-only DOM) in headless Chromium, skipped without one."""
from __future__ import annotations

import asyncio
import base64
import re
import shutil
import subprocess
import sys
import zipfile
from html.parser import HTMLParser
from pathlib import Path

import httpx
import pytest
import uvicorn
from meshward.devstack.nats_server import free_port
from meshward.supervisor.api import create_app
from meshward.supervisor.console import ASSETS
from meshward.supervisor.settings import SupervisorSettings

from tests.unit.supervisor.fakes import FakePorts

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
STATIC = REPO / "services/supervisor/src/meshward/supervisor/console/static"
TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml", ".html": "text/html; charset=utf-8"}


@pytest.fixture(scope="module")
async def console(tmp_path_factory):
    port = free_port()
    settings = SupervisorSettings(http_port=port, checkpoint_db=tmp_path_factory.mktemp("console") / "cp.db")
    server = uvicorn.Server(uvicorn.Config(create_app(settings, local_ports=FakePorts()), host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)  # polling uvicorn's own readiness flag
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
        yield client
    server.should_exit = True
    await task


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.urls: list[str] = []
        self.inline_scripts = 0
        self.inline_handlers: list[str] = []
        self.style_attributes = 0
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.urls += [attrs[k] for k in ("src", "href") if attrs.get(k, "").startswith("/")]
        if tag == "script" and not attrs.get("src"):
            self.inline_scripts += 1
        self.inline_handlers += [k for k in attrs if k.startswith("on")]
        self.style_attributes += "style" in attrs


def _csp(response: httpx.Response) -> dict[str, str]:
    return {d.split(" ", 1)[0]: d.split(" ", 1)[1] if " " in d else "" for d in (p.strip() for p in response.headers["content-security-policy"].split(";")) if d}


def _imports(js: str) -> list[str]:
    return re.findall(r"""(?:import|export)\s[^'"]*?from\s+['"](\./[\w-]+\.js)['"]""", js)


async def test_the_page_is_html_with_a_strict_policy(console):
    r = await console.get("/")
    assert r.status_code == 200 and r.headers["content-type"] == "text/html; charset=utf-8"
    csp = _csp(r)
    assert csp["default-src"] == "'none'" and csp["script-src"] == "'self'" and csp["style-src"] == "'self'"
    assert csp["img-src"] == "'self' data:" and csp["connect-src"] == "'self'" and csp["frame-ancestors"] == "'none'"
    assert csp["require-trusted-types-for"] == "'script'"
    assert "unsafe" not in r.headers["content-security-policy"]
    assert r.headers["x-content-type-options"] == "nosniff" and r.headers["referrer-policy"] == "no-referrer"
    page = _Page()
    page.feed(r.text)
    assert page.inline_scripts == 0 and page.inline_handlers == [] and page.style_attributes == 0
    assert "/console/main.js" in page.urls and "/console/console.css" in page.urls


async def test_every_asset_the_page_loads_is_served_with_its_type_and_policy(console):
    page = _Page()
    page.feed((await console.get("/")).text)
    wanted = {u.removeprefix("/console/") for u in page.urls}
    pending = [n for n in wanted if n.endswith(".js")]
    while pending:  # follow the ES module imports
        name = pending.pop()
        for imported in _imports((STATIC / name).read_text()):
            if imported[2:] not in wanted:
                wanted.add(imported[2:])
                pending.append(imported[2:])
    assert {"main.js", "api.js", "dom.js", "store.js", "view.js", "console.css", "icon.svg"} <= wanted
    for name in sorted(wanted):
        r = await console.get(f"/console/{name}")
        assert r.status_code == 200, name
        assert r.headers["content-type"] == TYPES[Path(name).suffix], name
        assert r.content == (STATIC / name).read_bytes()
        assert "script-src 'self'" in r.headers["content-security-policy"] and r.headers["x-content-type-options"] == "nosniff"


async def test_unchanged_assets_revalidate_with_304(console):
    first = await console.get("/console/main.js")
    assert first.headers["cache-control"] == "no-cache" and first.headers["etag"]
    again = await console.get("/console/main.js", headers={"If-None-Match": first.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    other = await console.get("/console/main.js", headers={"If-None-Match": '"something-else"'})
    assert other.status_code == 200 and other.content == first.content
    head = await console.head("/")
    assert head.status_code == 200 and head.headers["content-type"].startswith("text/html")


@pytest.mark.parametrize("path", ["/console/nope.js", "/console/index.html", "/console/..%2F__init__.py", "/console/__init__.py", "/console/a/b.js", "/console/"])
async def test_anything_else_under_console_is_a_typed_404(console, path):
    r = await console.get(path)
    assert r.status_code == 404, path
    assert set(r.json()["error"]) == {"code", "message", "details"}


async def test_the_console_is_not_part_of_the_api_document(console):
    paths = (await console.get("/openapi.json")).json()["paths"]
    assert "/" not in paths and not any(p.startswith("/console") for p in paths)
    assert "/v1/ask" in paths  # the API it is a client of is still there


def test_the_modules_build_dom_from_text_only():
    """Model and tool text is untrusted: no HTML-string sink and no code from strings in any module."""
    sinks = re.compile(r"\.innerHTML|\.outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|setTimeout\(\s*['\"`]|createContextualFragment|srcdoc")
    for path in STATIC.glob("*.js"):
        found = sinks.findall(path.read_text())
        assert not found, f"{path.name}: {found}"
    assert set(ASSETS) == {p.name for p in STATIC.iterdir() if p.suffix in TYPES}


def test_the_wheel_carries_the_console(tmp_path):
    """An installed wheel (and so each container image) serves the same files as this tree."""
    source = tmp_path / "supervisor"  # a copy: building in place would leave build/ in the tree
    shutil.copytree(REPO / "services/supervisor", source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    out = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(out), str(source)], check=True, cwd=tmp_path)
    (wheel,) = out.glob("meshward_supervisor-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {f"meshward/supervisor/console/static/{p.name}" for p in STATIC.iterdir() if p.suffix in TYPES}
    assert expected <= names, expected - names


# ------------------------------------------------------------------ the modules' logic, in headless Chromium


@pytest.fixture(scope="module")
async def tab(console):
    from tests.browser import launch_chromium

    playwright, browser = await launch_chromium()
    page = await browser.new_page()
    await page.goto(str(console.base_url) + "/")
    yield page
    await browser.close()
    await playwright.stop()


async def test_the_event_stream_parser_reads_split_crlf_chunks_and_skips_pings(tab):
    events = await tab.evaluate("""async () => {
        const { serverSentEvents } = await import('/console/api.js');
        const chunks = ['event: step\\r', '\\ndata: {"node":"security"}\\r\\n\\r\\n: ping\\r\\n\\r\\nevent: answer\\ndata: {"answer":', '"a\\\\nb"}\\n\\n'];
        const stream = new ReadableStream({ start(c) { for (const x of chunks) c.enqueue(new TextEncoder().encode(x)); c.close(); } });
        const out = [];
        for await (const e of serverSentEvents(stream)) out.push(e);
        return out;
    }""")
    assert events == [{"event": "step", "data": {"node": "security"}}, {"event": "answer", "data": {"answer": "a\nb"}}]
    error = await tab.evaluate("""async () => {
        const { serverSentEvents } = await import('/console/api.js');
        const stream = new ReadableStream({ start(c) { c.enqueue(new TextEncoder().encode('event: answer\\ndata: {not json\\n\\n')); c.close(); } });
        try { for await (const e of serverSentEvents(stream)) {} return null; } catch (e) { return [e.name, e.code]; }
    }""")
    assert error == ["ApiError", "bad_event"]


async def test_only_well_formed_raster_images_become_data_urls(tab):
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 32).decode()
    jpeg = base64.b64encode(b"\xff\xd8\xff\xe0" + b"\x00" * 32).decode()
    svg = base64.b64encode(b"<svg xmlns='http://www.w3.org/2000/svg'><script>alert(1)</script></svg>").decode()
    cases = [
        ({"mime_type": "image/png", "data_base64": png}, f"data:image/png;base64,{png}"),
        ({"mime_type": "IMAGE/JPEG", "data_base64": jpeg}, f"data:image/jpeg;base64,{jpeg}"),
        ({"mime_type": "image/png", "data_base64": jpeg}, None),  # bytes that are not the declared type
        ({"mime_type": "image/svg+xml", "data_base64": svg}, None),
        ({"mime_type": "text/html", "data_base64": png}, None),
        ({"mime_type": "image/png", "data_base64": png[:-4] + "*&^%"}, None),
        ({"mime_type": "image/png", "data_base64": png + ";base64,x"}, None),
        ({"mime_type": "image/png"}, None),
    ]
    got = await tab.evaluate(
        "async (cases) => { const { imageDataUrl } = await import('/console/dom.js'); return cases.map(imageDataUrl); }",
        [c for c, _ in cases],
    )
    assert got == [want for _, want in cases]


async def test_strings_become_text_nodes(tab):
    text = await tab.evaluate("""async () => {
        const { h } = await import('/console/dom.js');
        const el = h('p', {}, '<img src=x onerror=alert(1)>', ['<b>', 'x</b>']);
        return [el.childElementCount, el.textContent];
    }""")
    assert text == [0, "<img src=x onerror=alert(1)><b>x</b>"]


async def test_a_rejected_question_shows_the_servers_reason(tab):
    from playwright.async_api import expect

    await tab.fill("#question", "Calculate 1 + " + "1 + " * 1200)  # over MESHWARD_MAX_QUESTION_CHARS
    await tab.press("#question", "Enter")
    turn = tab.locator("article.turn").last
    await expect(turn).to_have_attribute("data-state", "failed")
    await expect(turn.locator(".error[role=alert]")).to_contain_text("the limit is 4000")
    await expect(tab.locator("#send")).to_be_enabled()
