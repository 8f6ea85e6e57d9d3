"""Training pipeline of the intent classifier (``python -m meshward.intent_training`` / ``meshward train intent``).

The model is trained for one scope file: its labels are the scope's intents plus out_of_scope, and the scope's
content is part of the model key, so a changed scope file needs ``meshward train intent`` (make up does it).
A build-time distribution: the intent service loads the built model (the newest one whose card names this
scope's fingerprint) and never imports this. Torch-free at import; building imports torch.
"""
from __future__ import annotations

from pathlib import Path

from meshward.classifier import Preprocessing, find_built
from meshward.intent.classifier import MODEL_NAME, PREPROCESSING_NAME, PREPROCESSING_VERSION, scope_fingerprint
from meshward.intent.scope import Scope, load_scope
from meshward.training import ModelSpec, TrainConfig, model_key

from .data import DATA_DIR, build_examples, labels_for

__all__ = ["MODEL_NAME", "build_spec", "find_model_dir", "key", "labels_for"]

CONFIG = TrainConfig(seed=13, epochs=5, batch_size=32, lr=1e-4, max_length=128, train_top_layers=3)
_HERE = Path(__file__).resolve().parent

DATA_HOW = (
    "The scope file's intent examples and out_of_scope_examples (each with two seeded augmentations: casing, "
    "punctuation, politeness, a typo), extra questions per intent and general out-of-scope questions "
    "(data/extra_examples.yaml, hand-written plus seeded template families; extras of intents the scope does not "
    "define count as out_of_scope), and casual chat (Chit Chat dataset sample) minus lines hitting any intent's "
    "keywords. The held-out split is by group: a scope example with its augmentations, an extra question, a "
    "template family or ten chat lines land in one split. Shares: test 15%, calib 15% of each label's examples."
)


def build_spec(scope: Scope | None = None, scope_file: str | Path | None = None) -> ModelSpec:
    from . import evaluate

    scope = scope or load_scope(scope_file)
    return ModelSpec(
        name=MODEL_NAME,
        display_name=f"meshward-intent-{scope.name}-minilm",
        description=(f"Intent classifier for the '{scope.name}' scope: {', '.join(scope.intents)} plus out_of_scope. "
                     "Fine-tuned from all-MiniLM-L6-v2 with mean pooling; in scope when 1 - p(out_of_scope) reaches "
                     "the calibrated threshold."),
        labels=labels_for(scope),
        preprocessing=Preprocessing(PREPROCESSING_NAME, PREPROCESSING_VERSION),
        key_parts=lambda: [_HERE / "__init__.py", _HERE / "data.py", _HERE / "evaluate.py", DATA_DIR,
                           scope.model_dump_json()],
        examples=lambda: build_examples(scope),
        data_how=DATA_HOW,
        score=evaluate.score,
        operating=evaluate.operating_point,
        headline=evaluate.headline,
        gates=evaluate.gates,
        config=CONFIG,
        extra_card={"scope": scope.name, "scope_fingerprint": scope_fingerprint(scope)},
    )


def key(scope: Scope | None = None) -> str:
    return model_key(build_spec(scope))


def find_model_dir(scope: Scope | None = None) -> Path:
    """The build for this scope, data, training code and hyper-parameters; ModelNotBuiltError when there is none."""
    return find_built(MODEL_NAME, key(scope),
                      hint="run `meshward train intent` (with the same MESHWARD_INTENT_SCOPE_FILE), or `make models`; "
                           "`make up` and `make test` build it too")
