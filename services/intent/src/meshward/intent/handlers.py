"""NATS door onto the scope classifier: meshward.v1.intent.classify."""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack
from dataclasses import dataclass

from meshward.bus import Service, ServiceError
from meshward.bus.context import current_deadline
from meshward.contracts import ErrorCode, IntentRequest, IntentResult, subjects

from .scope import load_scope
from .settings import IntentSettings


@dataclass(frozen=True)
class IntentState:
    scope: str
    classify: Callable[[IntentRequest], Awaitable[IntentResult]]


def create_service(settings: IntentSettings | None = None) -> Service[IntentState]:
    settings = settings or IntentSettings()
    service: Service[IntentState] = Service("intent")

    @service.build
    async def _build(svc: Service, stack: AsyncExitStack) -> IntentState:
        scope = load_scope(settings.scope_file)
        if settings.backend == "embedding":
            from meshward.embedding import get_encoder

            from .classifier import ScopeClassifier

            encoder = await asyncio.to_thread(get_encoder)
            classifier = await asyncio.to_thread(ScopeClassifier, scope, encoder)
            # One inference thread: numpy's BLAS already uses every core, and several Python
            # threads encoding at once thrash instead of going faster.
            inference = stack.enter_context(ThreadPoolExecutor(max_workers=1, thread_name_prefix="intent-inference"))
            svc.details.update(scope=scope.name, backend="embedding", encoder=encoder.model_version,
                               intents=",".join(scope.intents))
            return IntentState(scope.name, lambda req: asyncio.get_running_loop().run_in_executor(
                inference, classifier.classify, req.text, req.has_attachments))
        from meshward.classifier import MicroBatcher

        from .classifier import FineTunedScopeClassifier

        # Raises ModelNotBuiltError ("run `meshward train intent`") when the model for this scope is missing.
        classifier = await asyncio.to_thread(FineTunedScopeClassifier.load, scope, settings.model_dir,
                                             version=settings.model_version)
        batcher = MicroBatcher(classifier.classify_many, max_batch_size=settings.max_batch_size,
                               max_wait_ms=settings.max_wait_ms, name="intent")
        stack.push_async_callback(batcher.close)
        info = classifier.model_info
        svc.details.update(scope=scope.name, backend="finetuned", intents=",".join(scope.intents), model=info.name,
                           model_version=info.version, provider=info.provider or "",
                           threshold=f"{classifier.threshold:.3f}", max_batch_size=str(settings.max_batch_size),
                           max_wait_ms=str(settings.max_wait_ms))
        return IntentState(scope.name, lambda req: batcher.submit((req.text, req.has_attachments), deadline=current_deadline()))

    @service.handler(subjects.INTENT_CLASSIFY, IntentRequest)
    async def classify(req: IntentRequest) -> IntentResult:
        state = service.state
        if req.scope is not None and req.scope != state.scope:
            raise ServiceError(ErrorCode.NOT_FOUND, f"unknown scope {req.scope!r}; this service serves {state.scope!r}")
        return await state.classify(req)

    return service
