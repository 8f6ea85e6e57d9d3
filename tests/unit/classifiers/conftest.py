"""The built models (tests/conftest.py builds them, or finds them cached, at session start)."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def security_model():
    from meshward.security.classifier import SecurityClassifier

    return SecurityClassifier.load(device="cpu")


@pytest.fixture(scope="session")
def intent_model():
    from meshward.intent.classifier import FineTunedScopeClassifier
    from meshward.intent.scope import load_scope

    return FineTunedScopeClassifier.load(load_scope(), device="cpu")


def torch_or_skip():
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        pytest.skip("torch/transformers (the train extra) are not installed")


def torch_logits(model_dir, labels, texts):
    """Logits of the fine-tuned torch weights saved beside the ONNX files."""
    from meshward.classifier import base_model_dir
    from meshward.training.trainer import MeanPoolClassifier, load_tokenizer, predict_logits
    from safetensors.torch import load_file

    model = MeanPoolClassifier.from_config(base_model_dir(), len(labels))
    model.load_state_dict(load_file(str(model_dir / "torch" / "model.safetensors")))
    return predict_logits(model.eval(), load_tokenizer(model_dir / "tokenizer.json", 128), texts)
