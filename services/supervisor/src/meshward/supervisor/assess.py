"""Complexity analysis (reference design 004): which tier answers a question.

The fast tier answers when the template planner has a confident plan and the question asks
for something a template delivers (a figure, a chart, a command's output). Questions that ask
for an explanation, a comparison, advice or several things at once score higher; above the
threshold, or without a confident plan, the deep tier (an LLM with the intent's tools) answers.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .planner import Plan

DEEP_THRESHOLD = 0.7  # reference design 004: complexity > 0.7 -> deep reasoner

# (pattern, weight, what it signals); weights add up, capped at 1.0
_SIGNALS: tuple[tuple[re.Pattern[str], float, str], ...] = (
    (re.compile(r"\b(why|explain\w*|how (does|do|did|would|could|should|can) .{0,60}\b(work|works|happen|affect\w*|differ|cause\w*|mean|interact)|what (causes|caused|happens|would happen|does .{1,40} mean)|reasons? (for|why))\b", re.I), 0.8, "asks for an explanation"),
    (re.compile(r"\b(difference between|compare\w*|versus|vs\.?|pros and cons|trade-?offs?)\b", re.I), 0.8, "asks for a comparison"),
    (re.compile(r"\b(should (i|we)|recommend\w*|best (way|practice)\w*|advice|advise|troubleshoot\w*|diagnose|what (can|should) (i|we) do|how to fix|how (do|can) (i|we) (fix|reduce|improve|avoid))\b", re.I), 0.8, "asks for advice"),
    (re.compile(r"\b(summari[sz]e|recap) (our|this|the) (conversation|chat|discussion)\b", re.I), 0.8, "asks about the conversation"),
    (re.compile(r"\b(while|although|even though|despite|whereas)\b", re.I), 0.2, "relates several conditions"),
)
_LONG_WORDS = 25


@dataclass(frozen=True)
class Assessment:
    tier: str  # fast | deep
    complexity: float
    reason: str


def complexity(question: str) -> tuple[float, list[str]]:
    score, why = 0.0, []
    for pattern, weight, what in _SIGNALS:
        if pattern.search(question):
            score += weight
            why.append(what)
    if len(question.split()) > _LONG_WORDS:
        score += 0.2
        why.append("long question")
    if question.count("?") > 1:
        score += 0.2
        why.append("several questions")
    return min(score, 1.0), why


def assess(question: str, template: Plan, deep_available: bool = True) -> Assessment:
    """Fast when a confident template plan exists and the question is simple; deep otherwise."""
    score, why = complexity(question)
    if not deep_available:
        return Assessment("fast", score, "the deep tier is disabled: the template answers")
    if not template.confident:
        return Assessment("deep", max(score, 0.5), f"no confident template plan ({template.purpose or 'none'})" + (f"; {', '.join(why)}" if why else ""))
    if score > DEEP_THRESHOLD:
        return Assessment("deep", score, f"complexity {score:.2f} > {DEEP_THRESHOLD}: {', '.join(why)}")
    return Assessment("fast", score, f"template plan{': ' + template.purpose if template.purpose else ''}; complexity {score:.2f}")
