"""Tools end to end: the MCP door of the running tools service, and the questions that use
each tool through the graph, against loopback upstreams."""
from __future__ import annotations

import base64
import io

import pytest
from mcp import Client

from tests.fake_upstreams import PUBLIC_IP

pytestmark = pytest.mark.e2e

EVERY_TOOL = {"calculator", "plot", "pdf_extract", "public_ip", "ip_geolocate", "weather_forecast", "cli_execute", "discover_cli_tools", "remote_cli"}


async def ask(http, question, **extra):
    r = await http.post("/v1/ask", json={"question": question, **extra})
    assert r.status_code == 200, r.text
    return r.json()


def make_pdf(lines: list[str]) -> bytes:
    from matplotlib.backends.backend_pdf import PdfPages
    from matplotlib.figure import Figure

    buf = io.BytesIO()
    with PdfPages(buf) as pdf:
        fig = Figure(figsize=(8.5, 11))
        for i, line in enumerate(lines):
            fig.text(0.05, 0.95 - i * 0.04, line, fontsize=10)
        pdf.savefig(fig)
    return buf.getvalue()


async def test_an_mcp_client_lists_and_calls_every_tool(system):
    async with Client(system["mcp_url"]) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert EVERY_TOOL <= names
        calls = {
            "calculator": {"expression": "15 * 23 + 7"},
            "plot": {"kind": "bar", "labels": ["a", "b"], "values": [1, 2], "title": "t"},
            "pdf_extract": {"content_base64": base64.b64encode(make_pdf(["Rack 12 draws 8 kW."])).decode()},
            "public_ip": {},
            "ip_geolocate": {"ip": PUBLIC_IP},
            "weather_forecast": {"latitude": 50.11, "longitude": 8.68},
            "cli_execute": {"command": "uptime"},
            "discover_cli_tools": {},
        }
        for name, args in calls.items():
            result = await client.call_tool(name, args)
            assert not result.is_error, (name, result.content)
        assert (await client.call_tool("calculator", {"expression": "15 * 23 + 7"})).content[0].text == "352"
        image = (await client.call_tool("plot", calls["plot"])).content[0]
        assert image.type == "image" and base64.b64decode(image.data).startswith(b"\x89PNG")
        refused = await client.call_tool("cli_execute", {"command": "rm -rf / ; cat /etc/shadow"})
        assert refused.is_error and refused.content[0].text.startswith("refused: ")
        unknown_host = await client.call_tool("remote_cli", {"host": "nowhere", "command": "uptime"})
        assert unknown_host.is_error


async def test_weather_question_goes_ip_then_location_then_forecast(http, upstreams):
    body = await ask(http, "What's the weather like at the data center?")
    assert body["status"] == "answered", body
    assert body["tools_used"] == ["public_ip", "ip_geolocate", "weather_forecast"]
    assert "Frankfurt am Main" in body["answer"] and "7.4" in body["answer"] and "12.6" in body["answer"]


async def test_location_question(http):
    body = await ask(http, "Where is the data center located?")
    assert body["status"] == "answered" and body["tools_used"] == ["public_ip", "ip_geolocate"]
    assert "Frankfurt am Main" in body["answer"] and PUBLIC_IP in body["answer"]


async def test_chart_question_carries_the_image(http):
    body = await ask(http, "Draw a bar chart of cpu 30, memory 50, disk 20")
    assert body["status"] == "answered" and body["tools_used"] == ["plot"]
    assert len(body["images"]) == 1 and body["images"][0]["mime_type"] == "image/png"
    assert base64.b64decode(body["images"][0]["data_base64"]).startswith(b"\x89PNG")


async def test_diagnostics_question_runs_a_read_only_command(http):
    body = await ask(http, "How much disk space is free on the host?")
    assert body["status"] == "answered" and body["tools_used"] == ["cli_execute"]
    assert "Filesystem" in body["answer"]


async def test_question_about_an_attached_pdf_is_answered_from_its_text(http):
    pdf = make_pdf(["Cooling uses chilled water from the river loop.", "The backup generator runs on diesel for 48 hours."])
    attachment = {"name": "ops-manual.pdf", "content_base64": base64.b64encode(pdf).decode()}
    body = await ask(http, "How long can the backup generator run?", attachments=[attachment])
    assert body["status"] == "answered" and body["tools_used"] == ["pdf_extract"]
    assert "48 hours" in body["answer"] and "ops-manual.pdf" in body["answer"]


async def test_hostile_attachment_is_a_typed_answer_not_a_crash(http):
    junk = {"name": "junk.pdf", "content_base64": base64.b64encode(b"not a pdf at all" * 10).decode()}
    body = await ask(http, "Summarise the attached document", attachments=[junk])
    assert body["status"] == "answered" and "pdf_extract" in body["answer"]
    r = await http.post("/v1/ask", json={"question": "x", "attachments": [{"name": "a.pdf", "content_base64": 5}]})
    assert r.status_code == 422
