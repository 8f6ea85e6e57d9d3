"""Training pipeline of the security classifier (``python -m meshward.security_training`` / ``meshward train security``).

A build-time distribution: the security service loads the built model and never imports this. Torch-free at
import (:func:`key` for the stale-model test); building imports torch.
"""
from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from meshward.classifier import find_built
from meshward.security.classifier import MODEL_NAME, PREPROCESSING
from meshward.training import Example, ModelSpec, TrainConfig, model_key, split_by_group

from .data import DATA_DIR, LABELS, build_examples, family_of

__all__ = ["CONFIG", "LABELS", "MODEL_NAME", "build_spec", "find_model_dir", "held_out_splits", "key"]

DISPLAY_NAME = "meshward-security-minilm"
CONFIG = TrainConfig(seed=13, epochs=6, batch_size=32, lr=5e-5, max_length=128, train_top_layers=6)
_HERE = Path(__file__).resolve().parent

DATA_HOW = (
    "Template families (data/templates.yaml x data/slots.yaml, seeded draws; encoded payloads in ten "
    "encodings, data with injected instructions, split-word smuggling, emotional framings, harmful requests "
    "and their hard negatives: pasted logs, code, documents, security and help questions), hand-written examples "
    "(data/handwritten.yaml) and benign chat (a 3,000-message Chit Chat dataset sample). A seeded share gets an obfuscated copy "
    "(leetspeak, homoglyphs, zero-width characters, spaced letters, case, typos; benign as often as attacks); 'eval-only hidden' copies hide "
    "the text in base64, hex or Unicode tag characters behind a harmless carrier and are scored through the "
    "run-time decoding views, never trained on; the model is trained on the run-time views of each example. "
    "The held-out split is by group: one template (all its draws and their obfuscated copies), a hand-written example, or ten chat lines land in one split, so calib "
    "and test hold phrasings never seen in training; every template family keeps at least one template in "
    "training, so each attack idea is learned. Shares: test 15%, calib 15% of each label's examples."
)


@cache
def _base_pieces() -> Any:
    from meshward.classifier import WordPieces, base_model_dir

    return WordPieces(base_model_dir() / "tokenizer.json")


def _views(text: str) -> list[str]:
    """The canonical readings the service scores (the base model's tokenizer is the fine-tuned one's)."""
    from meshward.security.classifier import views

    return views(text, _base_pieces())


def build_spec() -> ModelSpec:
    from . import evaluate

    return ModelSpec(
        name=MODEL_NAME,
        display_name=DISPLAY_NAME,
        description=("Prompt-attack classifier for meshward's security service: benign plus six threat categories "
                     "(prompt_extraction, credential_extraction, role_manipulation, security_bypass, "
                     "config_inspection, harmful_content). Fine-tuned from all-MiniLM-L6-v2 with mean pooling; runs after the rules layer."),
        labels=LABELS,
        preprocessing=PREPROCESSING,
        key_parts=lambda: [_HERE / "__init__.py", _HERE / "data.py", _HERE / "evaluate.py", DATA_DIR],
        examples=build_examples,
        data_how=DATA_HOW,
        score=evaluate.score,
        operating=evaluate.operating_point,
        headline=evaluate.headline,
        gates=evaluate.gates,
        external=evaluate.external,
        training_views=_views,
        family_of=family_of,
        config=CONFIG,
    )


def held_out_splits(examples: list[Example]) -> dict[str, list[Example]]:
    """train / calib / test exactly as the build splits them."""
    return split_by_group(examples, seed=CONFIG.seed, family_of=family_of)


def key() -> str:
    return model_key(build_spec())


def find_model_dir() -> Path:
    """The build for the current data, training code and hyper-parameters; ModelNotBuiltError when there is none."""
    return find_built(MODEL_NAME, key())
