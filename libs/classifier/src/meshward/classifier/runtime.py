"""A built classifier at run time: onnxruntime + tokenizers + numpy, nothing else.

CUDAExecutionProvider when onnxruntime-gpu is installed and a GPU answers (fp16 model, fp32 as fallback),
CPUExecutionProvider otherwise (int8 dynamically quantised model). ``MESHWARD_CLASSIFIER_DEVICE``
(``auto`` | ``cpu`` | ``cuda``) and ``MESHWARD_CLASSIFIER_THREADS`` override the choice.

A dynamically quantised graph scales its activations per call, over every row in the call, so a row's score
would depend on the other rows it shares the call with. For such a graph the rows of each input (its *group*)
run in a call of their own: a verdict depends on the question alone, never on what else was in the
micro-batch. fp32 and fp16 graphs are batch-invariant and run batched.
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

from .store import read_card

__all__ = ["CPU", "CUDA", "ENV_DEVICE", "ENV_THREADS", "OnnxTextClassifier", "WordPieces", "available_providers",
           "softmax"]

CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"
ENV_DEVICE = "MESHWARD_CLASSIFIER_DEVICE"
ENV_THREADS = "MESHWARD_CLASSIFIER_THREADS"
ENV_SPIN = "MESHWARD_CLASSIFIER_SPIN"
_SUB_BATCH = 64  # rows per session.run on a CPU; bigger batches are split (bounded memory, similar lengths together)
_SUB_BATCH_CUDA = 256
_PAD_MULTIPLE = 8
DYNAMIC_QUANTIZED = frozenset({"model.int8.onnx"})  # activations scaled per call (see the module docstring)


def available_providers() -> list[str]:
    return list(ort.get_available_providers())


def _preload_cuda_libraries() -> None:
    """Load the CUDA and cuDNN libraries from NVIDIA's pip packages when they are installed (onnxruntime-gpu's
    own helper; a CUDA base image has them on the loader's path already)."""
    preload = getattr(ort, "preload_dlls", None)
    if preload is not None:
        preload()


def softmax(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    z = logits.astype(np.float64) / temperature
    z -= z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)


class WordPieces:
    """A text's every word-piece id, untruncated and without CLS/SEP (what views and windows are made of)."""

    def __init__(self, tokenizer_file: str | Path) -> None:
        self._tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()
        self.unk_id: int = self._tokenizer.token_to_id("[UNK]")
        self.cls_id: int = self._tokenizer.token_to_id("[CLS]")
        self.sep_id: int = self._tokenizer.token_to_id("[SEP]")

    def encode(self, text: str) -> list[int]:
        return self._tokenizer.encode(text, add_special_tokens=False).ids


class OnnxTextClassifier:
    """One exported classifier: ``logits(texts)`` / ``predict_proba(texts)`` over the labels of its card."""

    def __init__(self, model_dir: str | Path, *, device: str | None = None, threads: int | None = None,
                 model_file: str | None = None) -> None:
        self.model_dir = Path(model_dir)
        self.card: dict[str, Any] = read_card(self.model_dir)
        self.labels: tuple[str, ...] = tuple(self.card["labels"])
        self.max_length = int(self.card.get("max_length", 128))
        self.temperature = float(self.card.get("calibration", {}).get("temperature", 1.0))
        self.name = str(self.card.get("name", self.model_dir.name))
        self.version = str(self.card.get("version", "unknown"))

        device = (device or os.environ.get(ENV_DEVICE) or "auto").lower()
        if device not in ("auto", "cpu", "cuda"):
            raise ValueError(f"{ENV_DEVICE} must be auto, cpu or cuda, not {device!r}")
        cuda = device in ("auto", "cuda") and CUDA in available_providers()
        if device == "cuda" and not cuda:
            raise RuntimeError(f"{ENV_DEVICE}=cuda but onnxruntime has no {CUDA} (install the gpu extra: onnxruntime-gpu)")
        if cuda:
            _preload_cuda_libraries()
        self._session = self._open(model_file or self._default_file(cuda), threads, cuda)
        if cuda and self._session.get_providers()[0] != CUDA:
            # onnxruntime-gpu lists CUDA whenever it is installed; the provider itself only starts where the CUDA
            # and cuDNN libraries load, and otherwise onnxruntime quietly runs the GPU graph on the CPU
            if device == "cuda":
                raise RuntimeError(f"{ENV_DEVICE}=cuda but {CUDA} did not start: the CUDA 13 runtime and cuDNN 9 "
                                   "libraries must load (pip install 'onnxruntime-gpu[cuda,cudnn]', or a CUDA runtime "
                                   "+ cuDNN base image) and a GPU must be visible (nvidia-smi)")
            self._session = self._open(model_file or self._default_file(False), threads, False)
        self.provider: str = self._session.get_providers()[0]
        self._inputs = {i.name for i in self._session.get_inputs()}
        # rows per session.run: a GPU is fed larger calls than a CPU (bounded memory either way)
        self.sub_batch = _SUB_BATCH_CUDA if self.provider == CUDA else _SUB_BATCH

        self._tokenizer = Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(self.max_length)
        self.pieces = WordPieces(self.model_dir / "tokenizer.json")

    def _default_file(self, cuda: bool) -> str:
        candidates = ["model.fp16.onnx", "model.fp32.onnx"] if cuda else ["model.int8.onnx"]
        return next((c for c in candidates if (self.model_dir / c).is_file()), candidates[-1])

    def _open(self, model_file: str, threads: int | None, cuda: bool) -> ort.InferenceSession:
        self.model_file = model_file
        self.batch_invariant = model_file not in DYNAMIC_QUANTIZED
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = threads or int(os.environ.get(ENV_THREADS, "0") or 0) or min(4, os.cpu_count() or 1)
        options.inter_op_num_threads = 1
        if os.environ.get(ENV_SPIN, "false").lower() not in ("1", "true", "yes"):
            # ORT's worker threads otherwise spin between calls: a little latency saved on a dedicated node,
            # CPU taken from every other process on a shared one
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        providers = [CUDA, CPU] if cuda else [CPU]
        return ort.InferenceSession(str(self.model_dir / model_file), options, providers=providers)

    # ------------------------------------------------------------------ API
    @property
    def info(self) -> dict[str, str]:
        return {"name": self.name, "version": self.version, "provider": self.provider, "file": self.model_file}

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        return [e.ids for e in self._tokenizer.encode_batch(list(texts))]

    def token_windows(self, text: str, window: int, max_windows: int) -> list[list[int]]:
        return self.windows(self.pieces.encode(text), window, max_windows)

    def windows(self, ids: Sequence[int], window: int, max_windows: int) -> list[list[int]]:
        """Overlapping windows of at most ``window`` tokens (CLS/SEP added) covering a long token sequence.

        When a text needs more than ``max_windows`` windows, the first and last ones and evenly spaced ones in
        between are kept.
        """
        cls, sep = self.pieces.cls_id, self.pieces.sep_id
        body = max(8, min(window, self.max_length) - 2)
        if len(ids) <= body:
            return [[cls, *ids, sep]]
        stride = max(1, body * 3 // 4)
        starts = list(range(0, len(ids) - body + stride, stride))
        starts[-1] = len(ids) - body
        if len(starts) > max_windows:
            picks = np.linspace(0, len(starts) - 1, max_windows).round().astype(int)
            starts = [starts[i] for i in dict.fromkeys(picks.tolist())]
        return [[cls, *ids[s:s + body], sep] for s in starts]

    def logits(self, texts: Sequence[str]) -> np.ndarray:
        return self.logits_from_ids(self.tokenize(texts))

    def logits_from_ids(self, batch: Sequence[Sequence[int]], groups: Sequence[int] | None = None) -> np.ndarray:
        """Raw logits for token-id sequences.

        ``groups[i]`` names the input row ``i`` belongs to (default: each row is its own input). A batch-invariant
        graph runs similar lengths together, padded to a multiple of 8; a dynamically quantised one runs each
        input's rows in a call of their own, so that its logits never depend on the other inputs.
        """
        n = len(batch)
        out = np.zeros((n, len(self.labels)), dtype=np.float32)
        if n == 0:
            return out
        if self.batch_invariant:
            order = np.argsort([len(ids) for ids in batch], kind="stable")
            calls = [order[start:start + self.sub_batch] for start in range(0, n, self.sub_batch)]
        else:
            owners = list(range(n)) if groups is None else list(groups)
            if len(owners) != n:
                raise ValueError(f"groups has {len(owners)} entries for {n} rows")
            by_owner: dict[int, list[int]] = {}
            for row, owner in enumerate(owners):
                by_owner.setdefault(owner, []).append(row)
            calls = [np.asarray(rows[start:start + self.sub_batch]) for rows in by_owner.values()
                     for start in range(0, len(rows), self.sub_batch)]
        for rows in calls:
            out[rows] = self._run([batch[i] for i in rows], pad=self.batch_invariant and len(rows) > 1)
        return out

    def _run(self, rows: Sequence[Sequence[int]], *, pad: bool) -> np.ndarray:
        width = max(len(ids) for ids in rows)
        width = min(self.max_length, -(-width // _PAD_MULTIPLE) * _PAD_MULTIPLE) if pad else min(self.max_length, width)
        ids = np.zeros((len(rows), width), dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for r, seq in enumerate(rows):
            seq = seq[:width]
            ids[r, :len(seq)] = seq
            mask[r, :len(seq)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        return self._session.run(["logits"], feeds)[0].astype(np.float32)

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """Calibrated class probabilities (temperature from the model card), shape (len(texts), len(labels))."""
        return softmax(self.logits(texts), self.temperature)

    def __repr__(self) -> str:
        return f"OnnxTextClassifier({self.name} {self.version}, {self.model_file} on {self.provider})"
