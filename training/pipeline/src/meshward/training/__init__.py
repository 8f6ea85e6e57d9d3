"""The training pipeline shared by the security and intent models.

Torch-free here: :class:`TrainConfig`, :class:`Example`, the group split, the metrics and :func:`model_key`.
``trainer``, ``export`` and building (:func:`ensure_built`) need the ``train`` extra (torch, transformers, onnx).
"""
from .config import TrainConfig
from .examples import SPLITS, Example, data_hash, dedupe, label_counts, split_by_group
from .pipeline import ModelSpec, add_arguments, ensure_built, model_key, run_cli

__all__ = [
    "SPLITS",
    "Example",
    "ModelSpec",
    "TrainConfig",
    "add_arguments",
    "data_hash",
    "dedupe",
    "ensure_built",
    "label_counts",
    "model_key",
    "run_cli",
    "split_by_group",
]
