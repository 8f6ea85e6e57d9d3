"""The monolith the reference designs describe: the same graph, every service's logic
called in-process (no NATS). Used as the baseline of bench/e2e.py.

    .venv/bin/python bench/monolith.py --port 8099    # serve it over the same HTTP ingress
    .venv/bin/python bench/monolith.py --port 8099 --memory-dir /tmp/mono   # and keep history as memory does

With ``--memory-dir`` the interaction events go to memory's own event sink in this process (SQL rows,
embeddings in Chroma, as the memory service stores them from the stream); as in the distributed system
the answer does not wait for that storage.
"""
from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from meshward.contracts import (
    ErrorCode,
    ErrorReply,
    Event,
    IntentResult,
    OutputVerdict,
    RemoteError,
    SecurityVerdict,
    ToolCatalog,
    ToolResult,
)
from meshward.embedding import get_encoder
from meshward.intent.classifier import ScopeClassifier
from meshward.intent.scope import load_scope
from meshward.security.decision import RulesLayerAdapter, SecurityDecider
from meshward.security.output_check import OutputChecker
from meshward.security.rules import RulesLayer
from meshward.security.settings import DEFAULT_PROTECTED_PHRASES
from meshward.tools.builtin import build_registry
from meshward.tools.registry import ToolError


class LocalPorts:
    """`finetuned=True`: the services' default layers (rules then the fine-tuned security classifier,
    the fine-tuned intent classifier, both micro-batched as in the services); else rules + embedding intent."""

    def __init__(self, finetuned: bool = False, memory_dir: Path | None = None) -> None:
        self.memory_dir = memory_dir
        self._sink = None  # memory's EventSink, opened on the first event (it needs the running loop)
        self._opening = asyncio.Lock()
        self._storing: set[asyncio.Task] = set()
        self.checker = OutputChecker(DEFAULT_PROTECTED_PHRASES)
        self.registry = build_registry()
        scope = load_scope(None)
        if finetuned:
            from meshward.classifier import MicroBatcher
            from meshward.intent.classifier import FineTunedScopeClassifier
            from meshward.security.classifier import ClassifierLayer, SecurityClassifier

            model = SecurityClassifier.load(None)
            self.decider = SecurityDecider([RulesLayerAdapter(RulesLayer()), ClassifierLayer(model)], model=model.model_info)
            intent = FineTunedScopeClassifier.load(scope, None)
            batcher = MicroBatcher(intent.classify_many, name="intent")
            self._classify = lambda text, attached: batcher.submit((text, attached))
        else:
            self.decider = SecurityDecider([RulesLayerAdapter(RulesLayer())])
            classifier = ScopeClassifier(scope, get_encoder())
            self._classify = lambda text, attached: asyncio.to_thread(classifier.classify, text, attached)

    async def check_security(self, text: str, thread_id: str | None, context: list[str] | None = None) -> SecurityVerdict:
        return await self.decider.decide(text)

    async def classify_intent(self, text: str, has_attachments: bool) -> IntentResult:
        return await self._classify(text, has_attachments)

    async def list_tools(self) -> ToolCatalog:
        return ToolCatalog(tools=self.registry.catalog())

    async def call_tool(self, name: str, arguments: dict[str, Any], idempotency_key: str | None = None, read_only: bool = False) -> ToolResult:
        try:
            return await self.registry.call(name, arguments)
        except ToolError as e:
            raise RemoteError(ErrorReply.of(e.code if isinstance(e.code, ErrorCode) else ErrorCode.BAD_REQUEST, e.message)) from None

    async def call_approved_tool(self, name: str, arguments: dict[str, Any], approval_id: str, actor: str) -> ToolResult:
        try:
            return await self.registry.call(name, arguments, approved=True)
        except ToolError as e:
            raise RemoteError(ErrorReply.of(e.code if isinstance(e.code, ErrorCode) else ErrorCode.BAD_REQUEST, e.message)) from None

    async def check_output(self, answer: str, question: str) -> OutputVerdict:
        return self.checker.check(answer, question)

    async def _memory_sink(self):
        async with self._opening:
            if self._sink is not None:
                return self._sink
            from meshward.memory.handlers import EventSink
            from meshward.memory.learning import LearningPolicy
            from meshward.memory.semantic import SemanticMemory
            from meshward.memory.settings import MemorySettings
            from meshward.memory.store import MemoryStore

            assert self.memory_dir is not None
            settings = MemorySettings(database_url=f"sqlite+aiosqlite:///{self.memory_dir / 'memory.db'}", chroma_path=str(self.memory_dir / "chroma"))
            store = await MemoryStore.open(settings.database_url)
            semantic = await asyncio.to_thread(SemanticMemory.open, settings.chroma_path, None)
            policy = LearningPolicy(settings.learn_min_score, settings.learn_max_scope_similarity)
            self._sink = EventSink(store, semantic, policy, embed_linger_s=settings.embed_linger_ms / 1000)
            return self._sink

    async def publish(self, subject: str, event: Event) -> None:
        """Stored as memory's consumer stores it, off the answer's path (the distributed answer waits only for
        the stream's ack)."""
        if self.memory_dir is None:
            return
        sink = await self._memory_sink()
        task = asyncio.get_running_loop().create_task(sink(subject, event.model_dump_json().encode()))
        self._storing.add(task)
        task.add_done_callback(self._storing.discard)


def main() -> None:
    import uvicorn
    from meshward.bus.tracing import setup_tracing
    from meshward.supervisor.api import create_app
    from meshward.supervisor.settings import SupervisorSettings

    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--checkpoint-db", required=True)
    p.add_argument("--finetuned", action="store_true", help="the fine-tuned classifiers (the services' default)")
    p.add_argument("--memory-dir", type=Path, default=None, help="store the interaction events as memory does, here")
    args = p.parse_args()
    setup_tracing("meshward-monolith")  # as the services: exports when OTEL_EXPORTER_OTLP_ENDPOINT is set
    settings = SupervisorSettings(http_port=args.port, checkpoint_db=args.checkpoint_db)
    ports = LocalPorts(finetuned=args.finetuned, memory_dir=args.memory_dir)
    uvicorn.run(create_app(settings, local_ports=ports), host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
