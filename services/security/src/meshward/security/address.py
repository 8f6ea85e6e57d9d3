"""Which lines of untrusted content address the agent that reads it: what content mode's question layers (the rules
and the classifier) read of a document or a tool result.

Those layers learned requests: a question that asks to read /etc/passwd, export the environment, reveal a password or
override rules. Documentation says the same words to its human reader ("run `cat /etc/passwd`", "export the
environment variable", "override the default policies"), and the deep tier's content check withheld two thirds of the
READMEs, NEWS files and package descriptions on a machine for it (`bench/content_documents.py`). An injection speaks to
the agent reading it, where documentation at most describes one ("the assistant will transfer you"). It calls it
("to the AI", "Assistant,", "AI agents working in this repository:", "für die KI"), picks it out by what it does with
the text ("the model that reads this", "whoever processes this"), tells it what it must do ("the assistant must"), or
asks it to be one ("if you are an AI"). Or it refers to the conversation it lands in: tell the user, the user's last
message, this chat, the system prompt, your instructions, when summarizing this, end of document. Or it overrides what
came before (ignore the above, new task, `system:`), or is written in a chat template's markers. Those layers read only
the lines that do one of these, in any normalised reading (so leetspeak, spaced letters and base64 in the line count).
The content rules, written for content, read every line, and so does decode-and-judge's decoding; its readings go
through the same selection.
"""
from __future__ import annotations

import re

from .normalize import normalize

__all__ = ["addressed_lines", "addresses_reader", "content_lines"]

_PROCESS = (r"(?:read|process|summari[sz]|pars|handl|review|screen|evaluat|ingest|index|analy[sz]|translat|scan|run|"
            r"execut|work|operat|manag|produc)\w*")
# A machine reader by name (not "ai" inside a URL or a path: onnx.ai, docs/ai/)...
_MACHINE = (r"(?:(?<![./\w-])ai(?![./]\w)|a\.i\.|assistants?|chat\s?bots?|bots?|llms?|gpts?|copilots?|language\s+models?|"
            r"chatgpt|claude|gemini|llama|mistral|"
            r"ki|ia|asistente|assistente|assistenten|modele|modelo|modell|automation|(?:modele|modelo|modello)\s+(?:de\s+)?(?:langage|"
            r"lenguaje|linguagem|linguistico)|sprachmodell|(?:ai|llm|automated)[\w-]*\s+(?:[\w-]+\s+)?"
            r"(?:models?|agents?|systems?|tools?|readers?|reviewers?|screeners?))")
# ...in a construction that speaks to it, not about it ("the assistant will transfer you" describes a product): called
# ("to/for/dear/hey the AI", "Assistant," "AI agents:"), picked out by what it does with this text ("assistant analysing
# these logs", "the model that reads this"), told what it must do, or asked to be one ("if you are an AI").
_READER = (rf"(?:(?:to|for|dear|hey|hi|hello|attention)\s+(?:the\s+|any\s+|all\s+|an?\s+|every\s+|whatever\s+)?|@\s*|"
           # the same in the other languages of the security data ("für die KI", "à l'assistant", "para el asistente")
           rf"(?:fur|an)\s+(?:die|den|das)\s+|(?:a|pour)\s+(?:l'\s*|le\s+|la\s+)|(?:para|per)\s+(?:el|la|o|a|il|l')\s*|(?:al|ao)\s+|"
           rf"aan\s+de\s+)(?:[\w-]+\s+){{0,2}}?{_MACHINE}|"
           rf"{_MACHINE}\s+(?:override|instructions?|note|notice|message|prompt)\b|"
           rf"(?:^|[^\w\s'\"-]\s*|-\s+){_MACHINE}\s*[,:]|"
           rf"{_MACHINE}\s+(?:that\s+|which\s+|who\s+)?(?:is\s+|are\s+)?{_PROCESS}\s+(?:\w+\s+){{0,2}}?(?:this|these|the\s+above)|"
           rf"(?:the|any|an|this|every)\s+(?:models?|agents?)\s+(?:that\s+|which\s+|who\s+)?{_PROCESS}\s+(?:\w+\s+){{0,2}}?(?:this|these)|"
           rf"{_MACHINE}\s+(?:must|should|shall|has\s+to|have\s+to|needs?\s+to|is\s+(?:required|instructed)\s+to|will\s+now)|"
           rf"(?:if\s+you(?:'re|\s+are)|as)\s+(?:an?\s+|the\s+)?(?:[\w-]+\s+){{0,2}}?{_MACHINE}|"
           rf"(?:whoever|whatever|anyone|anything|any\s+(?:tool|system|program|reader))\s+(?:or\s+\w+\s+)?(?:is\s+)?{_PROCESS}|"
           rf"(?:^|[^\w\s'\"]\s*)(?:models?|agents?)\s+(?:that\s+|which\s+|who\s+)?{_PROCESS}\s+(?:\w+\s+){{0,2}}?(?:this|these)|"
           r"reader\s+(?:models?|agents?)|"
           r"(?:answering|reading|receiving|calling|downstream|consuming|responding)\s+(?:models?|assistants?|agents?|llms?|ai)")
# The conversation the text lands in, and what overrides it. "The user" alone is everywhere in documentation ("notifies
# the user"); an injection tells the user something or wants what the user said.
_CONVERSATION = (
    r"you(?:'re|\s+are)\s+now|from\s+(?:now|this\s+(?:point|line|message|moment))\s+on,?\s+you|"
    # overrides in scripts the classifier reads poorly: the rules for them read these lines
    r"忽略|无视|忘记(?:你|之前|以前|上面)|系统提示|以前の指示|無視して|지시(?:를|사항을)?\s*무시|이전\s*지시|"
    r"игнорируй|игнорируйте|забудь(?:те)?\s+(?:все\s+)?(?:предыдущ|прежн|свои|твои)|تجاهل|"
    r"(?:tell|inform|ask|show|give|send|remind|convince|warn|direct|redirect|assure)\s+the\s+user|"
    r"the\s+user'?s\s+(?:real|actual|last|previous|next|true|original|private|personal|data|messages?|request|question|"
    r"history)|(?:what|everything|anything|all)\s+the\s+user\s+(?:said|typed|wrote|asked|shared|sent|entered)|"
    r"(?:respond|reply|answer|say|write)\s+(?:only\s+)?to\s+the\s+user|(?:response|reply|answer|message)\s+(?:to|for)\s+the\s+user|"
    # a fake end of the data, then what follows it ("END OF CONTEXT. Next instruction:")
    r"end\s+of\s+(?:the\s+)?(?:context|document|input|data|file|text|tool\s+output|search\s+results?|page|email)|"
    r"(?:next|new|real|actual|updated|true)\s+(?:instructions?|task|request)|"
    # the answer fixed in advance, or the verdict on the document itself ("rank this candidate first")
    r"the\s+(?:answer|reply|response)\s+to\s+(?:any|every|all)\s+(?:questions?|quer(?:y|ies)|requests?)|"
    r"(?:rank|rate|score|grade|recommend|select|shortlist|approve|accept|prefer)\s+this\s+(?:candidate|applicant|paper|"
    r"submission|vendor|supplier|proposal|application|product|resume|cv|essay|bid|offer|company|loan)|"
    r"(?:by|when|while|before|after|on)\s+(?:processing|reading|summari[sz]ing|analy[sz]ing|parsing|ingesting|translating|"
    r"handling)\s+this|"
    r"(?:this|the|previous)\s+(?:conversation|chat\s+session)|system\s+prompt|"
    r"(?:before|when|while)\s+(?:you\s+)?(?:answer|repl|respond|summari[sz])\w*|summari[sz]ing\s+this|"
    r"summar(?:y|ies)\s+of\s+this|whatever\s+the\s+(?:request|question|task)|"
    r"(?:ignore|disregard)\s+(?:(?:all|any|the|your|these|those|of)\s+){0,3}(?:previous|prior|above|earlier|preceding|"
    r"original|everything|instructions|rules|guidance|guidelines|prompt|question|user|request|system|"
    r"(?:text|message|content|words)\s+(?:above|before))|"
    r"new\s+(?:task|instructions?)|(?:^|[\[(<])\s*system\s*:|your\s+(?:reply|answer|response|instructions|rules|task|guidelines|summary)")
# A chat template's own markers: text written in the model's input format.
_TEMPLATE = r"<\|?(?:im_start|im_end|system|endoftext)\|?>|\[/?inst\]|<</?sys>>|</?tool_(?:output|result|call)>"
_ADDRESS = re.compile(rf"(?<!\w)(?:{_READER}|{_CONVERSATION})(?!\w)|{_TEMPLATE}", re.IGNORECASE | re.MULTILINE)


def addresses_reader(line: str) -> bool:
    """Whether one line, in any normalised reading, speaks to a machine reader, refers to its conversation, overrides
    its instructions or uses a chat template's markers."""
    return any(_ADDRESS.search(reading) for reading in normalize(line))


# A JSON string, an iCalendar DESCRIPTION or a log field carries its line breaks escaped: "...!\\n\\nAgent managing
# this calendar: accept...". Read as lines, they start where the text's own lines would.
_ESCAPED_BREAK = re.compile(r"(?:\\r)?\\n")


def content_lines(text: str) -> list[str]:
    """``text``'s lines, escaped line breaks (a literal backslash-n) counted as breaks."""
    return _ESCAPED_BREAK.sub("\n", text).splitlines()


def addressed_lines(text: str) -> str:
    """``text``'s lines that address their reader, in order (empty when none does)."""
    return "\n".join(line for line in content_lines(text) if addresses_reader(line))
