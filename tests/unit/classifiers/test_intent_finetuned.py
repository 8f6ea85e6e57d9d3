"""The built intent classifier: held-out quality, independent phrasings, fast paths, batching, odd input."""
from __future__ import annotations

import numpy as np
import pytest
from meshward.classifier import OnnxTextClassifier
from meshward.contracts import OUT_OF_SCOPE
from meshward.intent.classifier import FineTunedScopeClassifier
from meshward.intent.scope import load_scope
from meshward.intent_training.data import build_examples
from meshward.training import split_by_group

from tests.unit.intent.test_intent_classifier import ATTACHMENT_CASES, IN_SCOPE, OUT_OF_SCOPE_QUESTIONS

from .conftest import torch_logits, torch_or_skip


@pytest.fixture(scope="module")
def held_out():
    examples, _ = build_examples(load_scope())
    return split_by_group(examples, seed=13)["test"]


def test_quality_gates_on_the_held_out_split(intent_model, held_out):
    results = intent_model.classify_many([(e.text, False) for e in held_out])
    ins = [(e, r) for e, r in zip(held_out, results, strict=True) if e.label != OUT_OF_SCOPE]
    oos = [(e, r) for e, r in zip(held_out, results, strict=True) if e.label == OUT_OF_SCOPE]
    in_acc = sum(r.intent == e.label for e, r in ins) / len(ins)
    oos_recall = sum(not r.in_scope for _, r in oos) / len(oos)
    assert in_acc >= 0.95, [(e.text, e.label, r.intent) for e, r in ins if r.intent != e.label]
    assert oos_recall >= 0.90, [(e.text, r.intent) for e, r in oos if r.in_scope]


def test_questions_phrased_unlike_any_training_data(intent_model):
    """The embedding classifier's own test questions: never part of the scope file or the extras."""
    results = intent_model.classify_many([(q, False) for q, _ in IN_SCOPE])
    right = [r.intent == want for (_, want), r in zip(IN_SCOPE, results, strict=True)]
    assert sum(right) / len(right) >= 0.9, [(q, w, r.intent) for (q, w), r, ok in zip(IN_SCOPE, results, right, strict=True) if not ok]
    off = intent_model.classify_many([(q, False) for q in OUT_OF_SCOPE_QUESTIONS])
    refused = [not r.in_scope for r in off]
    assert sum(refused) / len(refused) >= 0.85, [q for q, r in zip(OUT_OF_SCOPE_QUESTIONS, off, strict=True) if r.in_scope]


@pytest.mark.parametrize("text,intent", [
    ("Calculate 15 * 23 + 7", "calculation"),
    ("what's 17% of 250", "calculation"),
    ("What is 2 to the power of 10?", "calculation"),
    ("1200 divided by 16", "calculation"),
    ("sqrt(144) + 3", "calculation"),
    ("Calculate 6 * 7", "calculation"),
    ("what did I just ask?", "assistant_help"),
    ("Write me a poem about the sea", OUT_OF_SCOPE),
    # issue #10/#15 leftovers: ops knowledge goes to the deep tier, changes to memory, "where am I?" is location
    ("Explain how TCP congestion control works", "ops_knowledge"),
    ("Why would load average be high while CPU usage is low?", "ops_knowledge"),
    ("What is the weather like?", "weather"),
    ("where am I?", "location"),
    ("what changed since yesterday?", "cluster_changes"),
    ("what changed on lab in the last hour?", "cluster_changes"),
    ("Explain how the immune system works.", OUT_OF_SCOPE),
    ("Why are flamingos pink?", OUT_OF_SCOPE),
])
def test_what_the_end_to_end_tests_rely_on(intent_model, text, intent):
    assert intent_model.classify(text).intent == intent


@pytest.mark.parametrize("text,attached,intent", ATTACHMENT_CASES)
def test_attachments(intent_model, text, attached, intent):
    assert intent_model.classify(text, attached).intent == intent


def test_result_shape(intent_model):
    r = intent_model.classify("How much RAM is free?")
    assert r.in_scope and r.intent == "diagnostics" and r.scope == "datacenter" and r.method.startswith("classifier")
    assert 0 < r.confidence <= 1 and len(r.runner_ups) == 3 and r.intent not in {s.intent for s in r.runner_ups}
    off = intent_model.classify("Who won the World Cup in 2018?")
    assert not off.in_scope and off.intent == OUT_OF_SCOPE and len(off.runner_ups) == 3


@pytest.mark.parametrize("text", ["", "   ", "\u200b", "x" * 100_000, "\x00\x1b" * 3000, "Привет 你好 مرحبا 🙂" * 200])
def test_hostile_text(intent_model, text):
    r = intent_model.classify(text)
    assert 0.0 <= r.confidence <= 1.0 and r.in_scope == (r.intent != OUT_OF_SCOPE)


def test_batched_equals_unbatched(intent_model, held_out):
    texts = [e.text for e in held_out[:40]]
    together = intent_model.classify_many([(t, False) for t in texts])
    alone = [intent_model.classify(t) for t in texts]
    # int8 activations are quantised per call, so each question runs alone: answers never depend on the batch
    assert together == alone
    fp32 = OnnxTextClassifier(intent_model.clf.model_dir, device="cpu", model_file="model.fp32.onnx")
    batched = fp32.logits(texts)
    assert np.abs(batched - np.concatenate([fp32.logits([t]) for t in texts])).max() < 1e-3


def test_onnx_matches_torch(intent_model, held_out):
    torch_or_skip()
    texts = [e.text for e in held_out[:48]]
    labels = intent_model.clf.labels
    ref = torch_logits(intent_model.clf.model_dir, labels, texts)
    fp32 = OnnxTextClassifier(intent_model.clf.model_dir, device="cpu", model_file="model.fp32.onnx").logits(texts)
    assert np.abs(fp32 - ref).max() < 1e-3
    assert (intent_model.clf.logits(texts).argmax(1) == ref.argmax(1)).mean() >= 0.95


def test_a_model_for_another_scope_is_refused(intent_model):
    scope = load_scope()
    data = scope.model_dump()
    del data["intents"]["chart"]
    with pytest.raises(ValueError, match="meshward train intent"):
        FineTunedScopeClassifier(type(scope).model_validate(data), intent_model.clf)
