"""NATS door onto the scope classifier: meshward.v1.intent.classify."""
from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from meshward.bus import Service, ServiceError
from meshward.contracts import ErrorCode, IntentRequest, IntentResult, subjects
from meshward.embedding import get_encoder

from .classifier import ScopeClassifier
from .scope import load_scope
from .settings import IntentSettings


def create_service(settings: IntentSettings | None = None) -> Service:
    settings = settings or IntentSettings()
    service = Service("intent")
    state: dict[str, ScopeClassifier] = {}
    # One inference thread: numpy's BLAS already uses every core, and several Python
    # threads encoding at once thrash instead of going faster.
    inference = ThreadPoolExecutor(max_workers=1, thread_name_prefix="intent-inference")

    @service.on_startup
    async def _load(svc: Service) -> None:
        scope = load_scope(settings.scope_file)
        encoder = await asyncio.to_thread(get_encoder)
        state["classifier"] = await asyncio.to_thread(ScopeClassifier, scope, encoder)
        svc.details.update(scope=scope.name, encoder=encoder.model_version, intents=",".join(scope.intents))

    @service.handler(subjects.INTENT_CLASSIFY, IntentRequest)
    async def classify(req: IntentRequest) -> IntentResult:
        classifier = state["classifier"]
        if req.scope is not None and req.scope != classifier.scope.name:
            raise ServiceError(ErrorCode.NOT_FOUND, f"unknown scope {req.scope!r}; this service serves {classifier.scope.name!r}")
        return await asyncio.get_running_loop().run_in_executor(inference, classifier.classify, req.text, req.has_attachments)

    return service
