"""The fast-tier planner: staged plans with data flow, charts, diagnostics, documents."""
from __future__ import annotations

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from meshward.supervisor.asker import Asker
from meshward.supervisor.documents import answer_from_document
from meshward.supervisor.graph import GraphBuilder
from meshward.supervisor.planner import ToolCall, compose_answer, parse_chart, plan, resolve_arguments

from tests.unit.supervisor.fakes import FakePorts

ALL_TOOLS = {"calculator", "public_ip", "ip_geolocate", "weather_forecast", "plot", "pdf_extract", "cli_execute"}
GEO = [{"type": "data", "data": {"latitude": 48.85, "longitude": 2.35, "city": "Paris", "country": "France"}}, {"type": "text", "text": "Paris, France"}]
WEATHER = [{"type": "text", "text": "12.3 °C now, wind 8.1 km/h"}, {"type": "data", "data": {"temperature_c": 12.3}}]


def test_weather_is_a_three_stage_chain_with_data_flow():
    p = plan("weather", "what's the weather at the data center?", ALL_TOOLS)
    assert [(c.name, c.stage) for c in p.calls] == [("public_ip", 0), ("ip_geolocate", 1), ("weather_forecast", 2)]
    args = resolve_arguments(p.calls[2].arguments, {"ip_geolocate": {"content": GEO}})
    assert args == {"latitude": 48.85, "longitude": 2.35}


async def test_weather_question_runs_the_chain_and_quotes_the_figures():
    ports = FakePorts(intent="weather", tools=tuple(ALL_TOOLS), results={
        "public_ip": [{"type": "data", "data": {"ip": "203.0.113.7"}}],
        "ip_geolocate": GEO,
        "weather_forecast": WEATHER,
    })
    asker = Asker(GraphBuilder(ports).build(checkpointer=InMemorySaver()), ports)
    r = await asker.ask("What's the weather like at the data center?")
    assert r.status == "answered" and "12.3 °C" in r.answer and "Paris" in r.answer
    assert r.tools_used == ["public_ip", "ip_geolocate", "weather_forecast"]
    assert ports.tool_calls == [("public_ip", {}), ("ip_geolocate", {"ip": "203.0.113.7"}), ("weather_forecast", {"latitude": 48.85, "longitude": 2.35})]


async def test_a_failed_stage_stops_the_chain_with_its_error():
    ports = FakePorts(intent="location", tools=tuple(ALL_TOOLS), results={"public_ip": [{"type": "text", "text": "no data"}]})
    asker = Asker(GraphBuilder(ports).build(checkpointer=InMemorySaver()), ports)
    r = await asker.ask("where is the data center?")
    assert r.status == "error" and "ip_geolocate" in r.answer


@pytest.mark.parametrize(
    "question,expected",
    [
        ("bar chart of cpu 30, memory 50, disk 20", ("bar", ["cpu", "memory", "disk"], [30.0, 50.0, 20.0])),
        ("plot a line chart of mon: 3, tue: 5, wed: 4", ("line", ["mon", "tue", "wed"], [3.0, 5.0, 4.0])),
        ("histogram of 3, 5, 5, 8, 9", ("histogram", [], [3.0, 5.0, 5.0, 8.0, 9.0])),
        ("chart 10, 20, 30", ("bar", ["1", "2", "3"], [10.0, 20.0, 30.0])),
    ],
)
def test_chart_numbers_are_read_from_the_question(question, expected):
    kind, labels, values, _ = parse_chart(question)
    assert (kind, labels, values) == expected


def test_chart_without_numbers_asks_for_them():
    assert "numbers" in plan("chart", "draw me a chart", ALL_TOOLS).direct_answer


@pytest.mark.parametrize(
    "question,command",
    [
        ("How much disk space is free?", "df -h"),
        ("show memory usage", "free -m"),
        ("what's the load average", "cat /proc/loadavg"),
        ("how long has the server been up? uptime please", "uptime"),
        ("how many cores does this host have", "nproc"),
        ("which processes are using the most cpu", "ps -eo pid,comm,%cpu,%mem --sort=-%cpu"),
    ],
)
def test_diagnostics_map_to_read_only_commands(question, command):
    assert plan("diagnostics", question, ALL_TOOLS).calls == [ToolCall("cli_execute", {"command": command})]


def test_attachments_make_a_document_plan():
    p = plan("assistant_help", "summarise this", ALL_TOOLS, attachments=[{"name": "a.pdf", "content_base64": "JVBERi0="}])
    assert p.calls == [ToolCall("pdf_extract", {"content_base64": "JVBERi0="})]


def test_document_answers_are_extracted_from_the_text():
    text = "--- page 1 ---\nThe cooling system uses chilled water. Rack 12 draws 8 kW.\n\nThe backup generator runs on diesel for 48 hours."
    assert answer_from_document("Summarise the document", [text], ["ops.pdf"]).startswith("ops.pdf begins: The cooling system")
    answer = answer_from_document("How long does the backup generator run?", [text], ["ops.pdf"])
    assert "48 hours" in answer and "cooling" not in answer
    assert "nothing about that" in answer_from_document("What about quantum chromodynamics?", [text], ["ops.pdf"])
    assert "couldn't find any text" in answer_from_document("summary", [""], ["scan.pdf"])


def test_a_calculation_hands_the_question_to_the_calculator():
    p = plan("calculation", "  What is 2 to the power of 10? ", ALL_TOOLS)
    assert p.calls == [ToolCall("calculator", {"expression": "What is 2 to the power of 10?"})]
    read = [{"type": "text", "text": "1024"}, {"type": "data", "data": {"expression": "2 ** 10", "value": 1024}}]
    assert compose_answer("calculation", "What is 2 to the power of 10?", p, [{"name": "calculator", "content": read}]) == "2 ** 10 = 1024"


def test_no_calculation_found_is_answered_with_the_calculators_reason():
    p = plan("calculation", "what is the meaning of life", ALL_TOOLS)
    error = {"code": "bad_request", "message": "No calculation found ('meaning' at character 13 does not fit); write it like \"15 * 23 + 7\"."}
    answer = compose_answer("calculation", "what is the meaning of life", p, [{"name": "calculator", "error": error}])
    assert answer.startswith("I couldn't calculate that: No calculation found") and "15 * 23 + 7" in answer


async def test_a_question_without_a_calculation_is_answered_not_failed():
    ports = FakePorts(tool_error="bad_request")
    r = await Asker(GraphBuilder(ports).build(checkpointer=InMemorySaver()), ports).ask("what is 5")
    assert r.status == "answered" and r.answer.startswith("I couldn't calculate that")
    assert ports.tool_calls == [("calculator", {"expression": "what is 5"})]
