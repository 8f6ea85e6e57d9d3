"""meshward.embedding: a pure-numpy all-MiniLM-L6-v2 sentence encoder (numpy + safetensors + tokenizers)."""
from .encoder import (
    EMBEDDING_DIM,
    ENV_MODEL_DIR,
    MAX_SEQ_LENGTH,
    MODEL_NAME,
    EncoderModelNotFoundError,
    MiniLMEncoder,
    count_tokens,
    find_model_dir,
    get_encoder,
)

__all__ = [
    "EMBEDDING_DIM",
    "ENV_MODEL_DIR",
    "MAX_SEQ_LENGTH",
    "MODEL_NAME",
    "EncoderModelNotFoundError",
    "MiniLMEncoder",
    "count_tokens",
    "find_model_dir",
    "get_encoder",
]
