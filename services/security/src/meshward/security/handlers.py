"""NATS door onto the security logic: meshward.v1.security.check / .check_output."""
from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from dataclasses import dataclass

from meshward.bus import Service
from meshward.bus.context import current_request_id
from meshward.bus.tracing import current_trace_id
from meshward.contracts import (
    OutputCheckRequest,
    OutputVerdict,
    SecurityCheckRequest,
    SecurityVerdict,
    SecurityViolation,
    subjects,
)
from meshward.telemetry import metrics

from .decision import Layer, RulesLayerAdapter, SecurityDecider
from .known_threats import KnownThreatsLayer
from .output_check import OutputChecker
from .rules import RulesLayer
from .settings import SecuritySettings


@dataclass(frozen=True)
class SecurityState:
    decider: SecurityDecider


def create_service(settings: SecuritySettings | None = None) -> Service[SecurityState]:
    """Layers in order: rules, known threats (questions close to earlier blocks, from memory), then the
    fine-tuned classifier (``meshward train security``). A known threat decides before the classifier so the
    verdict says the question was seen before; memory learns only from rules and classifier blocks."""
    settings = settings or SecuritySettings()
    service: Service[SecurityState] = Service("security")
    rules: Layer = RulesLayerAdapter(RulesLayer())
    tail: list[Layer] = []
    if settings.known_threats:
        tail.append(KnownThreatsLayer(lambda: service.bus, settings.known_threat_similarity, settings.known_threats_timeout_s))
    checker = OutputChecker(settings.protected_phrases, settings.extra_secret_patterns)
    service.details["layers"] = ",".join(str(layer.name) for layer in [rules, *tail])

    @service.build
    async def _build(svc: Service, stack: AsyncExitStack) -> SecurityState:
        await svc.bus.ensure_event_stream()
        if not settings.classifier:
            return SecurityState(SecurityDecider([rules, *tail]))
        from .classifier import ClassifierLayer, SecurityClassifier

        # Raises ModelNotBuiltError ("run `meshward train security`") when the model is missing.
        model = await asyncio.to_thread(SecurityClassifier.load, settings.model_dir, threshold=settings.threshold)
        classifier = ClassifierLayer(model, max_batch_size=settings.max_batch_size, max_wait_ms=settings.max_wait_ms)
        stack.push_async_callback(classifier.close)
        layers: list[Layer] = [rules, *tail, classifier]
        info = model.model_info
        svc.details.update(layers=",".join(str(layer.name) for layer in layers), model=info.name,
                           model_version=info.version, provider=info.provider or "",
                           threshold=f"{model.threshold:.4f}", max_batch_size=str(settings.max_batch_size),
                           max_wait_ms=str(settings.max_wait_ms))
        return SecurityState(SecurityDecider(layers, model=info))

    @service.handler(subjects.SECURITY_CHECK, SecurityCheckRequest)
    async def check(req: SecurityCheckRequest) -> SecurityVerdict:
        verdict = await service.state.decider.decide(req.text)
        if not verdict.allowed:
            metrics.SECURITY_BLOCKS.labels(str(verdict.threat_category), str(verdict.layer)).inc()
        if not verdict.allowed and settings.publish_violations and verdict.threat_category is not None:
            service.bus.emit(
                subjects.EVENT_VIOLATION,
                SecurityViolation(
                    text=req.text,
                    category=verdict.threat_category,
                    score=verdict.score,
                    layer=verdict.layer,
                    thread_id=req.thread_id,
                    request_id=current_request_id(),
                    trace_id=current_trace_id(),
                ),
            )
        return verdict

    @service.handler(subjects.SECURITY_CHECK_OUTPUT, OutputCheckRequest)
    async def check_output(req: OutputCheckRequest) -> OutputVerdict:
        return checker.check(req.answer, req.question)

    return service
