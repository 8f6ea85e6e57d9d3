"""meshward.classifier: fine-tuned MiniLM text classifiers at run time (onnxruntime + tokenizers + numpy).

The training pipeline is the separate ``meshward-training`` distribution (:mod:`meshward.training`: torch,
transformers, onnx); nothing here imports it: a service loads a built model as an artifact.
"""
from .batcher import BatcherClosed, BatcherStats, DeadlineExceeded, MicroBatcher
from .runtime import CPU, CUDA, OnnxTextClassifier, WordPieces, available_providers, softmax
from .store import (
    ENV_MODELS_DIR,
    ModelNotBuiltError,
    Preprocessing,
    PreprocessingMismatchError,
    base_model_dir,
    base_model_fingerprint,
    find_built,
    fingerprint,
    model_dir,
    models_root,
    read_card,
    resolve_model,
    touch,
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
    "Preprocessing",
    "PreprocessingMismatchError",
    "WordPieces",
    "available_providers",
    "base_model_dir",
    "base_model_fingerprint",
    "find_built",
    "fingerprint",
    "model_dir",
    "models_root",
    "read_card",
    "resolve_model",
    "softmax",
    "touch",
]
