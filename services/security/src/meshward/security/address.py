"""Which lines of untrusted content address the agent that reads it: what content mode's question layers (the rules
and the classifier) read of a document or a tool result.

Those layers learned requests: a question that asks to read /etc/passwd, export the environment, reveal a password or
override rules. Documentation says the same words to its human reader ("run `cat /etc/passwd`", "export the
environment variable", "override the default policies"), and the deep tier's content check withheld two thirds of the
READMEs, NEWS files and package descriptions on a machine for it (`bench/content_documents.py`). An injection speaks to
the agent reading it. It names one: the assistant, the AI, an LLM, the model or agent that reads or runs this, an
automated screening system, KI, IA. Or it refers to the conversation it lands in: tell the user, the user's last
message, this chat, the system prompt, your instructions, before you answer, when summarizing this. Or it overrides
what came before: ignore the above, new task, `system:`. Those layers read only the lines that do one of these, in
any normalised reading (so leetspeak, spaced letters and base64 in the line count). The content rules, written for
content, read every line, and so does decode-and-judge's decoding; its readings go through the same selection.
"""
from __future__ import annotations

import re

from .normalize import normalize

__all__ = ["addressed_lines", "addresses_reader"]

_PROCESS = (r"(?:read|process|summari[sz]|pars|handl|review|screen|evaluat|ingest|index|analy[sz]|translat|scan|run|"
            r"execut)\w*")
# Who may be reading: a machine by name (not "ai" inside a URL or a path: onnx.ai, docs/ai/), or a model, agent or
# system described by what it does with the text.
_READER = (r"(?<![./\w-])ai(?![./]\w)|a\.i\.|assistants?|chat\s?bots?|bots?|llms?|gpts?|copilots?|language\s+models?|"
           r"ki|ia|asistente|assistente|modele|modelo|modell|automation|automated|"
           rf"(?:reader|{_PROCESS}|screening|search|coding|code|ai|llm)\s+(?:models?|agents?|systems?)|"
           rf"(?:the|any|an|this|every)\s+(?:models?|agents?)\s+(?:that\s+|which\s+|who\s+)?{_PROCESS}|reader")
# The conversation the text lands in, and what overrides it. "The user" alone is everywhere in documentation ("notifies
# the user"); an injection tells the user something or wants what the user said.
_CONVERSATION = (
    r"you(?:'re|\s+are)\s+now|from\s+(?:now|this\s+point)\s+on,?\s+you|"
    r"(?:tell|inform|ask|show|give|send|remind|convince|warn|direct|redirect|assure)\s+the\s+user|"
    r"the\s+user'?s\s+(?:real|actual|last|previous|next|true|original|private|personal|data|messages?|request|question|"
    r"history)|(?:what|everything|anything|all)\s+the\s+user\s+(?:said|typed|wrote|asked|shared|sent|entered)|"
    r"(?:this|the|previous)\s+(?:conversation|chat\s+session)|system\s+prompt|"
    r"(?:before|when|while)\s+(?:you\s+)?(?:answer|repl|respond|summari[sz])\w*|summari[sz]ing\s+this|"
    r"summar(?:y|ies)\s+of\s+this|whoever\s+(?:reads|processes|summari[sz]es|handles)|"
    r"(?:ignore|disregard)\s+(?:(?:all|any|the|your|these|those|of)\s+){0,3}(?:previous|prior|above|earlier|preceding|"
    r"original|everything|instructions|rules|guidance|guidelines|prompt|question|user|request|system|"
    r"(?:text|message|content|words)\s+(?:above|before))|"
    r"new\s+(?:task|instructions?)|(?:^|[\[(<])\s*system\s*:|your\s+(?:reply|answer|response|instructions|rules|task|guidelines|summary)")
_ADDRESS = re.compile(rf"\b(?:{_READER}|{_CONVERSATION})\b", re.IGNORECASE | re.MULTILINE)


def addresses_reader(line: str) -> bool:
    """Whether one line, in any normalised reading, names a machine reader, refers to its conversation or overrides
    its instructions."""
    return any(_ADDRESS.search(reading) for reading in normalize(line))


def addressed_lines(text: str) -> str:
    """``text``'s lines that address their reader, in order (empty when none does)."""
    return "\n".join(line for line in text.splitlines() if addresses_reader(line))
