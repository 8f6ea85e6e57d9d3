"""NATS door onto the security logic: meshward.v1.security.check / .check_output."""
from __future__ import annotations

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

from .decision import RulesLayerAdapter, SecurityDecider
from .known_threats import KnownThreatsLayer
from .output_check import OutputChecker
from .rules import RulesLayer
from .settings import SecuritySettings


def create_service(settings: SecuritySettings | None = None) -> Service:
    settings = settings or SecuritySettings()
    service = Service("security")
    layers = [RulesLayerAdapter(RulesLayer())]
    if settings.known_threats:
        layers.append(KnownThreatsLayer(lambda: service.bus, settings.known_threat_similarity, settings.known_threats_timeout_s))
    decider = SecurityDecider(layers)
    checker = OutputChecker(settings.protected_phrases, settings.extra_secret_patterns)
    service.details["layers"] = ",".join(str(layer.name) for layer in layers)

    @service.on_startup
    async def _stream(svc: Service) -> None:
        await svc.bus.ensure_event_stream()

    @service.handler(subjects.SECURITY_CHECK, SecurityCheckRequest)
    async def check(req: SecurityCheckRequest) -> SecurityVerdict:
        verdict = await decider.decide(req.text)
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
