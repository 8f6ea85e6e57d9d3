"""The fast tier: a rule planner and template answers, no LLM.

plan() turns (intent, question) into tool calls or a direct answer;
compose_answer() turns tool results into the reply text.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from .arithmetic import extract_expression

# What each in-scope intent needs from the tools service.
TOOLS_FOR_INTENT: dict[str, tuple[str, ...]] = {
    "calculation": ("calculator",),
    "weather": ("public_ip", "ip_geolocate", "weather_forecast"),
    "location": ("public_ip", "ip_geolocate"),
    "chart": ("plot",),
    "document": ("pdf_extract",),
    "diagnostics": ("cli_execute",),
}

CAPABILITIES = (
    "I'm meshward, a data-center operations assistant. I can do calculations "
    "(for example \"17% of 250\" or \"sqrt(144) + 3\"), tell you the weather and location of the data center, "
    "draw charts, answer questions about documents you attach, run read-only host diagnostics, "
    "and recall what you asked earlier in this conversation."
)


@dataclass
class ToolCall:
    name: str
    arguments: dict[str, Any]


@dataclass
class Plan:
    tier: str = "fast"
    calls: list[ToolCall] = field(default_factory=list)
    direct_answer: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Plan:
        return cls(tier=d.get("tier", "fast"), calls=[ToolCall(**c) for c in d.get("calls", [])], direct_answer=d.get("direct_answer"))


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


def plan(intent: str, question: str, available_tools: set[str], history: list[dict[str, str]] | None = None) -> Plan:
    history = history or []
    if intent == "assistant_help":
        return Plan(direct_answer=_recall(question, history) or CAPABILITIES)
    needed = TOOLS_FOR_INTENT.get(intent, ())
    missing = [t for t in needed if t not in available_tools]
    if missing:
        return Plan(
            direct_answer=(
                f"That is a {intent} question, which needs the {', '.join(missing)} tool"
                f"{'s' if len(missing) > 1 else ''}; this deployment's tools service does not offer "
                f"{'them' if len(missing) > 1 else 'it'} yet. Available tools: {', '.join(sorted(available_tools)) or 'none'}."
            )
        )
    if intent == "calculation":
        expression = extract_expression(question)
        if expression is None:
            return Plan(direct_answer="I couldn't find a calculation in that. Try something like \"15 * 23 + 7\" or \"17% of 250\".")
        return Plan(calls=[ToolCall("calculator", {"expression": expression})])
    return Plan(direct_answer=f"I understood a {intent} question but have no fast-tier plan for it.")


def _text_of(result: dict[str, Any]) -> str:
    return " ".join(c.get("text", "") for c in result.get("content", []) if c.get("type") == "text").strip()


def compose_answer(intent: str, question: str, p: Plan, results: list[dict[str, Any]]) -> str:
    if p.direct_answer is not None:
        return p.direct_answer
    parts = []
    for call, result in zip(p.calls, results, strict=True):
        if "error" in result:
            err = result["error"]
            parts.append(f"I couldn't run {call.name}: {err['message']}")
        elif call.name == "calculator":
            parts.append(f"{call.arguments['expression']} = {_text_of(result)}")
        else:
            parts.append(_text_of(result))
    return "\n".join(parts)
