"""In-memory AgentPorts for unit tests of the graph logic (no network)."""
from __future__ import annotations

from datetime import UTC, datetime

from meshward.contracts import (
    ChatResponse,
    ClusterChangesReply,
    ContextReply,
    DataContent,
    DecidingLayer,
    ErrorCode,
    ErrorReply,
    IntentResult,
    OutputVerdict,
    RemoteError,
    SearchReply,
    SecurityVerdict,
    TextContent,
    ThreatCategory,
    ToolCatalog,
    ToolResult,
    ToolSpec,
)


def reply(content="", tool_calls=(), finish_reason=None, provider="fake", model="tiny", prompt_tokens=10, completion_tokens=5):
    """A scripted ChatResponse: text, or tool calls given as (id, name, arguments)."""
    calls = [{"id": i, "name": n, "arguments": a} for i, n, a in tool_calls]
    return ChatResponse.model_validate({
        "message": {"role": "assistant", "content": content, "tool_calls": calls},
        "finish_reason": finish_reason or ("tool_calls" if calls else "stop"),
        "provider": provider,
        "model": model,
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens},
    })


class FakePorts:
    def __init__(self, intent="calculation", in_scope=True, threat=None, tool_error=None, fail=None, leak=False, tools=("calculator",), results=None,
                 chat=(), content_threats=(), context=None, similar=(), needs_approval=(), changes=None, read_only_tools=(),
                 deferred=False):
        self.intent, self.in_scope, self.threat = intent, in_scope, threat
        self.deferred = deferred  # the threat is an unsure classifier verdict that waits for scope
        self.tool_error, self.fail, self.leak, self.tools = tool_error, fail, leak, tools
        self.results = results or {}  # tool name -> list of content dicts
        self.chat_script = list(chat)  # ChatResponse or Exception, one per chat call
        self.content_threats = set(content_threats)  # sources whose content security blocks
        self.context = context  # ContextReply for the thread, or None
        self.similar = list(similar)  # Hits of memory.search
        self.changes = changes  # ClusterChangesReply of memory.cluster_changes
        self.events = []
        self.calls = []
        self.tool_calls = []
        self.chat_requests = []
        self.content_checks = []
        self.security_contexts = []
        self.needs_approval = set(needs_approval)  # tools whose calls the tools service says need a human
        self.approved_calls = []
        self.idempotency_keys = []
        self.read_only_tools = set(read_only_tools)  # tools the catalog says are read-only
        self.read_only_flags = []  # the read_only each call_tool was given

    def _maybe_fail(self, name):
        self.calls.append(name)
        if self.fail == name:
            raise RemoteError(ErrorReply.of(ErrorCode.UNAVAILABLE, f"no service answers {name}"))

    async def check_security(self, text, thread_id, context=None):
        self._maybe_fail("security")
        self.security_contexts.append(list(context or []))
        if self.threat and self.deferred:
            return SecurityVerdict(allowed=False, threat_category=ThreatCategory(self.threat), score=0.8, layer=DecidingLayer.CLASSIFIER,
                                   reason="classifier p=0.80", deferred_to_scope=True)
        if self.threat:
            return SecurityVerdict(allowed=False, threat_category=ThreatCategory(self.threat), score=0.97, layer=DecidingLayer.RULES, reason="rule")
        return SecurityVerdict(allowed=True, score=0.0, layer=DecidingLayer.NONE)

    async def classify_intent(self, text, has_attachments):
        self._maybe_fail("intent")
        return IntentResult(intent=self.intent if self.in_scope else "out_of_scope", in_scope=self.in_scope, confidence=0.9, scope="datacenter")

    async def list_tools(self):
        return ToolCatalog(tools=[ToolSpec(name=t, description="", input_schema={}, read_only=t in self.read_only_tools) for t in self.tools])

    async def call_tool(self, name, arguments, idempotency_key=None, read_only=False):
        self._maybe_fail("tools")
        self.tool_calls.append((name, arguments))
        self.idempotency_keys.append(idempotency_key)
        self.read_only_flags.append(read_only)
        if self.tool_error:
            raise RemoteError(ErrorReply.of(ErrorCode(self.tool_error), "exponent too large"))
        if name in self.needs_approval:
            raise RemoteError(ErrorReply.of(ErrorCode.NEEDS_APPROVAL, f"needs human approval: {name} is not on the allowlist"))
        if name in self.results:
            return ToolResult.model_validate({"name": name, "content": self.results[name]})
        # the calculator reports the expression it read along with the value
        return ToolResult(name=name, content=[TextContent(text="352"), DataContent(data={"expression": "15 * 23 + 7", "value": 352})])

    async def check_output(self, answer, question):
        self._maybe_fail("output_check")
        if self.leak:
            return OutputVerdict(safe=False, leak="secret", redacted_answer="key is [REDACTED]")
        return OutputVerdict(safe=True)

    async def check_content(self, text, source, thread_id=None):
        self._maybe_fail("content")
        self.content_checks.append((source, text))
        if source in self.content_threats:
            return SecurityVerdict(allowed=False, threat_category=ThreatCategory.ROLE_MANIPULATION, score=0.99, layer=DecidingLayer.CLASSIFIER, source=source)
        return SecurityVerdict(allowed=True, score=0.01, layer=DecidingLayer.NONE, source=source)

    async def thread_context(self, thread_id):
        self._maybe_fail("memory")
        return self.context or ContextReply(thread_id=thread_id, turns=[], tokens=0, compressed=False)

    async def search_memory(self, query, k):
        self._maybe_fail("memory")
        return SearchReply(hits=self.similar[:k])

    async def cluster_changes(self, request):
        self._maybe_fail("memory")
        self.tool_calls.append(("memory.cluster_changes", request.model_dump(exclude_none=True)))
        return self.changes or ClusterChangesReply(since=datetime.now(UTC), changes=[], checks=0)

    async def chat(self, request, on_token=None, timeout=None):
        self._maybe_fail("llm")
        self.chat_requests.append(request)
        if not self.chat_script:
            raise AssertionError("the graph asked the LLM more often than the test scripted")
        step = self.chat_script.pop(0)
        if isinstance(step, Exception):
            raise step
        if on_token and step.message.content:
            for word in step.message.content.split(" "):
                on_token(word + " ", False)
        return step

    async def call_approved_tool(self, name, arguments, approval_id, actor):
        self.approved_calls.append((name, arguments, approval_id, actor))
        return ToolResult(name=name, content=[TextContent(text=f"ran {arguments.get('command', name)}: approved-output")])

    async def publish(self, subject, event):
        self.events.append((subject, event))
