"""The fast tier: a rule planner and template answers, no LLM.

plan() turns (intent, question, attachments) into staged tool calls or a direct
answer. Calls of one stage are independent and run in parallel; a later stage
may take an argument from an earlier result with {"$from": tool, "key": field}
(for example weather: public_ip -> ip_geolocate(ip) -> weather_forecast(lat, lon)).
compose_answer() turns the results into the reply text.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from .clusters import CLUSTER_INTENTS, cluster_answer, plan_cluster
from .clusters import TOOLS as CLUSTER_TOOLS
from .documents import answer_from_document

# What each in-scope intent needs from the tools service.
TOOLS_FOR_INTENT: dict[str, tuple[str, ...]] = {
    "calculation": ("calculator",),
    "weather": ("public_ip", "ip_geolocate", "weather_forecast"),
    "location": ("public_ip", "ip_geolocate"),
    "chart": ("plot",),
    "document": ("pdf_extract",),
    "diagnostics": ("cli_execute",),
    # explanations (deep tier only): the model may read this host's state to ground them
    "ops_knowledge": ("cli_execute",),
    **CLUSTER_TOOLS,
}

CAPABILITIES = (
    "I'm meshward, a data-center operations assistant. I can do calculations "
    "(for example \"17% of 250\" or \"sqrt(144) + 3\"), tell you the weather and location of the data center, "
    "draw charts (\"bar chart of cpu 30, memory 50, disk 20\"), answer questions about PDFs you attach, "
    "run read-only host diagnostics (disk, memory, uptime, load, CPU, top processes), "
    "report on registered Kubernetes clusters (\"which clusters do we have?\", \"is prod-eu healthy?\", "
    "\"what changed since yesterday?\"), explain operations topics (\"why would load be high with an idle CPU?\"), "
    "and recall what you asked earlier in this conversation."
)

# Read-only diagnostics: phrase -> allowlisted command (the tools service checks its own allowlist again).
DIAGNOSTICS: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (re.compile(r"\b(disk|storage|filesystem|file system|space)\b"), "df -h", "disk usage"),
    (re.compile(r"\b(memory|ram|swap)\b"), "free -m", "memory"),
    (re.compile(r"\b(load|load average)\b"), "cat /proc/loadavg", "load average"),
    (re.compile(r"\b(uptime|up time|how long .* (up|running)|since .* boot)\b"), "uptime", "uptime"),
    (re.compile(r"\b(how many (cpus?|cores|processors)|cpu count|number of (cpus?|cores))\b"), "nproc", "CPU count"),
    (re.compile(r"\b(process(es)?|top|hogging|consum\w*|using the most)\b"), "ps -eo pid,comm,%cpu,%mem --sort=-%cpu", "top processes"),
    (re.compile(r"\b(cpu|processor)\b"), "cat /proc/loadavg", "CPU load"),
)

# What the capabilities text answers: questions about the assistant itself, greetings, thanks.
_ABOUT_ME = re.compile(
    r"\b(help|what can you|what (kind|sort) of (questions|things)|capabilit\w*|who are you|what are you|your name|"
    r"how (do|can) i use|which tools|what tools|tools do you|are you a (bot|human)|example questions|"
    r"hello|hi|hey|thanks?|thank you|good (morning|afternoon|evening))\b",
    re.IGNORECASE,
)
_CHART_KIND = (("histogram", "histogram"), ("distribution", "histogram"), ("line", "line"), ("trend", "line"), ("over time", "line"))
_PAIR = re.compile(r"([A-Za-z][\w .\-/]{0,40}?)\s*(?:[:=]|\bis\b|\bat\b|\s)\s*(-?\d+(?:\.\d+)?)\s*%?(?=\s*(?:,|;|\band\b|$|\.))")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_TITLE = re.compile(r"\b(?:titled|title|called)\s+[\"']?([^\"',;]{1,80})[\"']?", re.IGNORECASE)
MAX_CHART_POINTS = 100


@dataclass
class ToolCall:
    name: str
    arguments: dict[str, Any]
    stage: int = 0


@dataclass
class Plan:
    tier: str = "fast"
    calls: list[ToolCall] = field(default_factory=list)
    direct_answer: str | None = None
    purpose: str = ""
    # False when the template has no real answer (a "Which one?" prompt, a fallback text):
    # the question then goes to the deep tier rather than get a canned reply.
    confident: bool = True

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Plan:
        return cls(
            tier=d.get("tier", "fast"),
            calls=[ToolCall(**c) for c in d.get("calls", [])],
            direct_answer=d.get("direct_answer"),
            purpose=d.get("purpose", ""),
            confident=d.get("confident", True),
        )

    def stages(self) -> list[list[ToolCall]]:
        by_stage: dict[int, list[ToolCall]] = {}
        for c in self.calls:
            by_stage.setdefault(c.stage, []).append(c)
        return [by_stage[k] for k in sorted(by_stage)]


def ref(tool: str, key: str) -> dict[str, str]:
    return {"$from": tool, "key": key}


def resolve_arguments(arguments: dict[str, Any], results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Replace {"$from": tool, "key": k} by that tool's data field `k` (KeyError when absent)."""
    out = {}
    for name, value in arguments.items():
        if isinstance(value, dict) and "$from" in value:
            out[name] = data_of(results[value["$from"]])[value["key"]]
        else:
            out[name] = value
    return out


def data_of(result: dict[str, Any]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for c in result.get("content", []):
        if c.get("type") == "data":
            merged.update(c.get("data") or {})
    return merged


def text_of(result: dict[str, Any]) -> str:
    return "\n".join(c.get("text", "") for c in result.get("content", []) if c.get("type") == "text").strip()


def _recall(question: str, history: list[dict[str, str]]) -> str | None:
    q = question.lower()
    if not any(w in q for w in ("ask", "question", "said", "say")):
        return None
    if not history:
        return "This is the first question in this conversation."
    if "first" in q:
        return f"Your first question was: \"{history[0]['question']}\""
    if any(w in q for w in ("last", "just", "previous", "before")):
        return f"You just asked: \"{history[-1]['question']}\""
    return None


def parse_chart(question: str) -> tuple[str, list[str], list[float], str] | None:
    q = question.strip()
    lower = q.lower()
    kind = next((k for word, k in _CHART_KIND if word in lower), "bar")
    title_match = _TITLE.search(q)
    title = title_match.group(1).strip() if title_match else ""
    body = q[: title_match.start()] if title_match else q
    body = re.sub(r"^.*?\b(?:of|for|with|showing)\b", "", body, count=1, flags=re.IGNORECASE) if re.search(r"\b(?:of|for|with|showing)\b", body, re.IGNORECASE) else body
    pairs = [(m.group(1).strip(" .-"), float(m.group(2))) for m in _PAIR.finditer(body)]
    pairs = [(label, value) for label, value in pairs if label and not label.lower().endswith(("chart", "plot", "graph", "histogram"))]
    if kind == "histogram" or not pairs:
        values = [float(x) for x in _NUMBER.findall(body)]
        if len(values) < 2:
            return None
        labels = [] if kind == "histogram" else [str(i + 1) for i in range(len(values))]
        return kind, labels[:MAX_CHART_POINTS], values[:MAX_CHART_POINTS], title or f"{kind} chart"
    labels, values = zip(*pairs[:MAX_CHART_POINTS], strict=True)
    return kind, list(labels), list(values), title or f"{kind} chart"


def _diagnostic(question: str) -> tuple[str, str] | None:
    q = question.lower()
    for pattern, command, what in DIAGNOSTICS:
        if pattern.search(q):
            return command, what
    return None


def plan(
    intent: str,
    question: str,
    available_tools: set[str],
    history: list[dict[str, str]] | None = None,
    attachments: list[dict[str, str]] | None = None,
) -> Plan:
    history = history or []
    attachments = attachments or []
    if attachments and intent not in ("calculation", "chart"):
        intent = "document"
    if intent == "assistant_help":
        recalled = _recall(question, history)
        if recalled is not None:
            return Plan(direct_answer=recalled, purpose="help")
        return Plan(direct_answer=CAPABILITIES, purpose="help", confident=bool(_ABOUT_ME.search(question)))
    needed = TOOLS_FOR_INTENT.get(intent, ())
    missing = [t for t in needed if t not in available_tools]
    if missing:
        return Plan(
            direct_answer=(
                f"That is a {intent} question, which needs the {', '.join(missing)} tool"
                f"{'s' if len(missing) > 1 else ''}; this deployment's tools service does not offer "
                f"{'them' if len(missing) > 1 else 'it'}. Available tools: {', '.join(sorted(available_tools)) or 'none'}."
            ),
            purpose=intent,
        )
    if intent == "calculation":
        # The calculator owns the arithmetic, natural phrasing included: it reads the question itself and
        # answers "no calculation found" (bad_request) when there is none.
        return Plan(calls=[ToolCall("calculator", {"expression": question.strip()})], purpose="calculation")
    if intent in ("weather", "location"):
        calls = [ToolCall("public_ip", {}, 0), ToolCall("ip_geolocate", {"ip": ref("public_ip", "ip")}, 1)]
        if intent == "weather":
            calls.append(ToolCall("weather_forecast", {"latitude": ref("ip_geolocate", "latitude"), "longitude": ref("ip_geolocate", "longitude")}, 2))
        return Plan(calls=calls, purpose=intent)
    if intent == "chart":
        parsed = parse_chart(question)
        if parsed is None:
            return Plan(direct_answer="Give me the numbers to chart, for example \"bar chart of cpu 30, memory 50, disk 20\" or \"histogram of 3, 5, 5, 8, 9\".", purpose="chart", confident=False)
        kind, labels, values, title = parsed
        return Plan(calls=[ToolCall("plot", {"kind": kind, "labels": labels, "values": values, "title": title})], purpose="chart")
    if intent == "diagnostics":
        found = _diagnostic(question)
        if found is None:
            return Plan(direct_answer="I can report disk space, memory, uptime, load, CPU count and top processes. Which one?", purpose="diagnostics", confident=False)
        return Plan(calls=[ToolCall("cli_execute", {"command": found[0]})], purpose=f"diagnostics: {found[1]}")
    if intent in CLUSTER_INTENTS:
        return plan_cluster(intent, question, Plan, ToolCall)
    if intent == "document":
        pdfs = [a for a in attachments if a.get("content_base64")]
        if not pdfs:
            return Plan(direct_answer="Attach the PDF (\"attachments\": [{\"name\", \"content_base64\"}]) and ask me about it.", purpose="document")
        return Plan(calls=[ToolCall("pdf_extract", {"content_base64": a["content_base64"]}) for a in pdfs], purpose="document")
    return Plan(direct_answer=f"I understood a {intent} question but have no fast-tier plan for it.", confident=False)


def _weather_answer(results: dict[str, dict[str, Any]], purpose: str) -> str:
    geo = data_of(results.get("ip_geolocate", {}))
    place = ", ".join(str(geo[k]) for k in ("city", "region", "country") if geo.get(k)) or "the data center"
    if purpose == "location":
        coords = f" ({geo['latitude']}, {geo['longitude']})" if "latitude" in geo and "longitude" in geo else ""
        return f"The data center is in {place}{coords}, judging by its public IP {data_of(results.get('public_ip', {})).get('ip', '?')}."
    return f"Weather at the data center in {place}: {text_of(results.get('weather_forecast', {}))}"


def compose_answer(intent: str, question: str, p: Plan, results: list[dict[str, Any]], attachments: list[dict[str, str]] | None = None) -> str:
    if p.direct_answer is not None:
        return p.direct_answer
    if p.purpose.startswith("cluster_"):
        return cluster_answer(p.purpose, results, text_of, data_of)
    errors = [(c, r) for c, r in zip(p.calls, results, strict=False) if "error" in r]
    if errors:
        call, r = errors[0]
        if p.purpose == "calculation":
            return f"I couldn't calculate that: {r['error']['message']}"
        return f"I couldn't run {call.name}: {r['error']['message']}"
    by_name = {c.name: r for c, r in zip(p.calls, results, strict=True)}
    if p.purpose in ("weather", "location"):
        return _weather_answer(by_name, p.purpose)
    if p.purpose == "document":
        texts = [text_of(r) for r in results]
        names = [a.get("name", f"attachment {i + 1}") for i, a in enumerate(attachments or [])]
        return answer_from_document(question, texts, names)
    parts = []
    for call, result in zip(p.calls, results, strict=True):
        if call.name == "calculator":
            # the expression the calculator read, in symbols ("2 ** 10"), not the question's words
            expression = data_of(result).get("expression", call.arguments["expression"])
            parts.append(f"{expression} = {text_of(result)}")
        elif call.name == "plot":
            parts.append(f"Here is the {text_of(result) or 'chart'} (image attached).")
        elif call.name == "cli_execute":
            parts.append(f"{p.purpose.split(': ', 1)[-1].capitalize()} (`{call.arguments['command']}`):\n{text_of(result)}")
        else:
            parts.append(text_of(result))
    return "\n".join(parts)
