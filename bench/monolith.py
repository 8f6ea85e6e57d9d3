"""The monolith the reference designs describe: the same graph, every service's logic
called in-process (no NATS). Used as the baseline of bench/e2e.py.

    .venv/bin/python bench/monolith.py --port 8099    # serve it over the same HTTP ingress
"""
from __future__ import annotations

import argparse
import asyncio
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

    def __init__(self, finetuned: bool = False) -> None:
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

    def emit(self, subject: str, event: Event) -> None:
        pass

    async def publish(self, subject: str, event: Event) -> None:
        pass


def main() -> None:
    import uvicorn
    from meshward.bus.tracing import setup_tracing
    from meshward.supervisor.api import create_app
    from meshward.supervisor.settings import SupervisorSettings

    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--checkpoint-db", required=True)
    p.add_argument("--finetuned", action="store_true", help="the fine-tuned classifiers (the services' default)")
    args = p.parse_args()
    setup_tracing("meshward-monolith")  # as the services: exports when OTEL_EXPORTER_OTLP_ENDPOINT is set
    settings = SupervisorSettings(http_port=args.port, checkpoint_db=args.checkpoint_db)
    uvicorn.run(create_app(settings, local_ports=LocalPorts(finetuned=args.finetuned)), host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
