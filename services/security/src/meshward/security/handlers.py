"""NATS door onto the security logic: meshward.v1.security.check / .check_output."""
from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from dataclasses import dataclass

from meshward.bus import Service
from meshward.bus.context import current_request_id
from meshward.bus.tracing import current_trace_id
from meshward.contracts import (
    ModelInfo,
    OutputCheckRequest,
    OutputVerdict,
    SecurityCheckRequest,
    SecurityVerdict,
    SecurityViolation,
    subjects,
)
from meshward.telemetry import metrics

from .decision import Layer, RulesLayerAdapter, SecurityDecider
from .decoding import DecodeLayer
from .judge import (
    CONTENT_MIN_SCORE,
    CONVERSATION_MIN_SCORE,
    ContentRulesLayer,
    SecurityJudge,
    addressed_only,
    injections_only,
    prose_only,
    surer_than,
)
from .known_threats import KnownThreatsLayer
from .normalize import revealed
from .output_check import OutputChecker
from .rules import RulesLayer
from .settings import SecuritySettings
from .suffix import SuffixLayer


def _judge(rules: Layer, known: list[Layer], classifier: list[Layer], model: ModelInfo | None = None,
           conversation_min_score: float = CONVERSATION_MIN_SCORE, content_min_score: float = CONTENT_MIN_SCORE) -> SecurityJudge:
    """Questions: rules, known threats, the adversarial-suffix layer, each decoded reading (judged by the
    rules and the classifier), the classifier. Content: the same less known threats and suffixes (pasted data
    has its own shapes), plus the rules for text that addresses the assistant. There the question rules read only
    the lines that address the agent reading them, and the classifier only those that also read as language (in
    the text and in each decoded reading), without scalar metadata lines, blocking at ``content_min_score``."""
    decode = DecodeLayer([rules, *classifier])
    questions = SecurityDecider([rules, *known, SuffixLayer(), decode, *classifier], model=model)
    conversations = SecurityDecider([rules, SuffixLayer(), decode, *classifier], model=model)
    addressed_rules = addressed_only([rules])
    content_classifier = prose_only(surer_than(classifier, content_min_score))
    content = SecurityDecider(injections_only([*addressed_rules, ContentRulesLayer(),
                                               DecodeLayer([*addressed_rules, *content_classifier]), *content_classifier]),
                              model=model)
    return SecurityJudge(questions, content, conversation_min_score, conversations)


@dataclass(frozen=True)
class SecurityState:
    judge: SecurityJudge


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
    service.details["layers"] = ",".join(str(layer.name) for layer in _judge(rules, tail, []).questions.layers)

    @service.build
    async def _build(svc: Service, stack: AsyncExitStack) -> SecurityState:
        await svc.bus.ensure_event_stream()
        if not settings.classifier:
            return SecurityState(_judge(rules, tail, []))
        from .classifier import ClassifierLayer, SecurityClassifier

        # Raises ModelNotBuiltError ("run `meshward train security`") when the model is missing.
        model = await asyncio.to_thread(SecurityClassifier.load, settings.model_dir,
                                        version=settings.model_version, threshold=settings.threshold)
        other_scripts = None
        if settings.chargram:
            from .chargram import CharGramModel

            # Raises ModelNotBuiltError ("run `meshward train security-chargram`") when it is missing.
            other_scripts = await asyncio.to_thread(CharGramModel.load, settings.chargram_dir,
                                                    threshold=settings.chargram_threshold)
        classifier = ClassifierLayer(model, max_batch_size=settings.max_batch_size, max_wait_ms=settings.max_wait_ms,
                                     other_scripts=other_scripts, encoder_floor=settings.encoder_floor,
                                     harm_sure_score=settings.harm_sure_score, harm_min_share=settings.harm_min_share)
        stack.push_async_callback(classifier.close)
        info = model.model_info
        judge = _judge(rules, tail, [classifier], model=info, conversation_min_score=settings.conversation_min_score,
                       content_min_score=settings.content_min_score)
        svc.details.update(layers=",".join(str(layer.name) for layer in judge.questions.layers),
                           model=info.name,
                           model_version=info.version, provider=info.provider or "",
                           threshold=f"{model.threshold:.4f}", max_batch_size=str(settings.max_batch_size),
                           max_wait_ms=str(settings.max_wait_ms),
                           harm_deferred_to_scope=f"under {settings.harm_sure_score:g} with {settings.harm_min_share:g} of "
                                                  f"the threat on harm" if settings.harm_sure_score > 0 else "never",
                           other_scripts=f"{other_scripts.version} threshold {other_scripts.threshold:.4f}, encoder floor "
                                         f"{settings.encoder_floor:g}" if other_scripts else "encoder only")
        return SecurityState(judge)

    @service.handler(subjects.SECURITY_CHECK, SecurityCheckRequest)
    async def check(req: SecurityCheckRequest) -> SecurityVerdict:
        judgement = await service.state.judge.check(req)
        verdict = judgement.verdict
        if not verdict.allowed:
            # a block deferred to scope is counted apart: most of them end as scope refusals, not threats
            layer = f"{verdict.layer}:deferred_to_scope" if verdict.deferred_to_scope else str(verdict.layer)
            metrics.SECURITY_BLOCKS.labels(str(verdict.threat_category), layer).inc()
        if (not verdict.allowed and judgement.learnable and settings.publish_violations
                and verdict.threat_category is not None):
            service.bus.emit(
                subjects.EVENT_VIOLATION,
                SecurityViolation(
                    text=req.text,
                    reading=revealed(req.text),
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
