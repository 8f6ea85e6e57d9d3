"""meshward.embedding: the all-MiniLM-L6-v2 sentence encoder (numpy + safetensors + tokenizers; onnxruntime when
installed, the `onnx` extra)."""
from .encoder import (
    EMBEDDING_DIM,
    ENV_MODEL_DIR,
    ENV_RUNTIME,
    ENV_THREADS,
    MAX_SEQ_LENGTH,
    MODEL_NAME,
    EncoderModelNotFoundError,
    MiniLMEncoder,
    count_tokens,
    find_model_dir,
    get_encoder,
)
from .scripts import in_trained_script

__all__ = [
    "EMBEDDING_DIM",
    "ENV_MODEL_DIR",
    "ENV_RUNTIME",
    "ENV_THREADS",
    "MAX_SEQ_LENGTH",
    "MODEL_NAME",
    "EncoderModelNotFoundError",
    "MiniLMEncoder",
    "count_tokens",
    "find_model_dir",
    "get_encoder",
    "in_trained_script",
]
