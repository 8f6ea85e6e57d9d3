"""NATS door onto the scope classifier: meshward.v1.intent.classify."""
from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from meshward.bus import Service, ServiceError
from meshward.bus.context import current_deadline
from meshward.contracts import ErrorCode, IntentRequest, IntentResult, subjects

from .scope import load_scope
from .settings import IntentSettings


def create_service(settings: IntentSettings | None = None) -> Service:
    settings = settings or IntentSettings()
    service = Service("intent")
    state: dict = {}

    @service.on_startup
    async def _load(svc: Service) -> None:
        scope = load_scope(settings.scope_file)
        state["scope"] = scope.name
        if settings.backend == "embedding":
            from meshward.embedding import get_encoder

            from .classifier import ScopeClassifier

            encoder = await asyncio.to_thread(get_encoder)
            classifier = await asyncio.to_thread(ScopeClassifier, scope, encoder)
            # One inference thread: numpy's BLAS already uses every core, and several Python
            # threads encoding at once thrash instead of going faster.
            inference = ThreadPoolExecutor(max_workers=1, thread_name_prefix="intent-inference")
            state["classify"] = lambda req: asyncio.get_running_loop().run_in_executor(
                inference, classifier.classify, req.text, req.has_attachments)
            svc.details.update(scope=scope.name, backend="embedding", encoder=encoder.model_version,
                               intents=",".join(scope.intents))
            return
        from meshward.classifier import MicroBatcher

        from .classifier import FineTunedScopeClassifier

        # Raises ModelNotBuiltError ("run `meshward train intent`") when the model for this scope is missing.
        classifier = await asyncio.to_thread(FineTunedScopeClassifier.load, scope, settings.model_dir)
        batcher = MicroBatcher(classifier.classify_many, max_batch_size=settings.max_batch_size,
                               max_wait_ms=settings.max_wait_ms, name="intent")
        state["classify"] = lambda req: batcher.submit((req.text, req.has_attachments), deadline=current_deadline())
        info = classifier.model_info
        svc.details.update(scope=scope.name, backend="finetuned", intents=",".join(scope.intents), model=info.name,
                           model_version=info.version, provider=info.provider or "",
                           threshold=f"{classifier.threshold:.3f}", max_batch_size=str(settings.max_batch_size),
                           max_wait_ms=str(settings.max_wait_ms))

        @svc.on_shutdown
        async def _close(_: Service) -> None:
            await batcher.close()

    @service.handler(subjects.INTENT_CLASSIFY, IntentRequest)
    async def classify(req: IntentRequest) -> IntentResult:
        if req.scope is not None and req.scope != state["scope"]:
            raise ServiceError(ErrorCode.NOT_FOUND, f"unknown scope {req.scope!r}; this service serves {state['scope']!r}")
        return await state["classify"](req)

    return service
