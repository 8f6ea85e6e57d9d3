"""meshward.classifier: fine-tuned MiniLM text classifiers at run time (onnxruntime + tokenizers + numpy).

The training pipeline lives in :mod:`meshward.classifier.training` and needs the ``train`` extra
(torch, transformers, onnx); nothing imported from here pulls it in.
"""
from .batcher import BatcherClosed, BatcherStats, DeadlineExceeded, MicroBatcher
from .runtime import CPU, CUDA, OnnxTextClassifier, WordPieces, available_providers, softmax
from .store import (
    ENV_MODELS_DIR,
    ModelNotBuiltError,
    base_model_dir,
    base_model_fingerprint,
    find_built,
    fingerprint,
    model_dir,
    models_root,
    read_card,
)

__all__ = [
    "CPU",
    "CUDA",
    "ENV_MODELS_DIR",
    "BatcherClosed",
    "BatcherStats",
    "DeadlineExceeded",
    "MicroBatcher",
    "ModelNotBuiltError",
    "OnnxTextClassifier",
    "WordPieces",
    "available_providers",
    "base_model_dir",
    "base_model_fingerprint",
    "find_built",
    "fingerprint",
    "model_dir",
    "models_root",
    "read_card",
    "softmax",
]
