"""In-memory AgentPorts for unit tests of the graph logic (no network)."""
from __future__ import annotations

from meshward.contracts import (
    DataContent,
    DecidingLayer,
    ErrorCode,
    ErrorReply,
    IntentResult,
    OutputVerdict,
    RemoteError,
    SecurityVerdict,
    TextContent,
    ThreatCategory,
    ToolCatalog,
    ToolResult,
    ToolSpec,
)


class FakePorts:
    def __init__(self, intent="calculation", in_scope=True, threat=None, tool_error=None, fail=None, leak=False, tools=("calculator",), results=None):
        self.intent, self.in_scope, self.threat = intent, in_scope, threat
        self.tool_error, self.fail, self.leak, self.tools = tool_error, fail, leak, tools
        self.results = results or {}  # tool name -> list of content dicts
        self.events = []
        self.calls = []
        self.tool_calls = []

    def _maybe_fail(self, name):
        self.calls.append(name)
        if self.fail == name:
            raise RemoteError(ErrorReply.of(ErrorCode.UNAVAILABLE, f"no service answers {name}"))

    async def check_security(self, text, thread_id):
        self._maybe_fail("security")
        if self.threat:
            return SecurityVerdict(allowed=False, threat_category=ThreatCategory(self.threat), score=0.97, layer=DecidingLayer.RULES, reason="rule")
        return SecurityVerdict(allowed=True, score=0.0, layer=DecidingLayer.NONE)

    async def classify_intent(self, text, has_attachments):
        self._maybe_fail("intent")
        return IntentResult(intent=self.intent if self.in_scope else "out_of_scope", in_scope=self.in_scope, confidence=0.9, scope="datacenter")

    async def list_tools(self):
        return ToolCatalog(tools=[ToolSpec(name=t, description="", input_schema={}) for t in self.tools])

    async def call_tool(self, name, arguments):
        self._maybe_fail("tools")
        self.tool_calls.append((name, arguments))
        if self.tool_error:
            raise RemoteError(ErrorReply.of(ErrorCode(self.tool_error), "exponent too large"))
        if name in self.results:
            return ToolResult.model_validate({"name": name, "content": self.results[name]})
        # the calculator reports the expression it read along with the value
        return ToolResult(name=name, content=[TextContent(text="352"), DataContent(data={"expression": "15 * 23 + 7", "value": 352})])

    async def check_output(self, answer, question):
        self._maybe_fail("output_check")
        if self.leak:
            return OutputVerdict(safe=False, leak="secret", redacted_answer="key is [REDACTED]")
        return OutputVerdict(safe=True)

    def emit(self, subject, event):
        self.events.append((subject, event))

    async def publish(self, subject, event):
        self.events.append((subject, event))
