"""Fine-tune the packaged MiniLM encoder as a sequence classifier (torch + transformers; the `train` extra).

The model is BERT (6 layers, hidden 384) with mean pooling over the attention mask (how all-MiniLM-L6-v2 was
trained as a sentence encoder) and one linear layer on top. Seeded end to end; length-bucketed batches with
dynamic padding keep a 2-core CPU busy with real tokens rather than padding.
"""
from __future__ import annotations

import math
import os
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer
from torch import nn
from tqdm.auto import tqdm
from transformers import BertConfig, BertModel
from transformers.utils import logging as hf_logging

from .config import TrainConfig

__all__ = ["MeanPoolClassifier", "TrainConfig", "load_tokenizer", "predict_logits", "seed_everything", "train"]

hf_logging.set_verbosity_error()
hf_logging.disable_progress_bar()


class MeanPoolClassifier(nn.Module):
    def __init__(self, encoder: BertModel, n_labels: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.encoder = encoder
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(encoder.config.hidden_size, n_labels)

    @classmethod
    def from_base(cls, base_dir: Path, n_labels: int) -> MeanPoolClassifier:
        encoder = BertModel.from_pretrained(str(base_dir), add_pooling_layer=False, attn_implementation="eager")
        return cls(encoder, n_labels)

    @classmethod
    def from_config(cls, base_dir: Path, n_labels: int) -> MeanPoolClassifier:
        """Same architecture, uninitialised weights (to load a fine-tuned state dict into)."""
        config = BertConfig.from_pretrained(str(base_dir))
        config._attn_implementation = "eager"
        return cls(BertModel(config, add_pooling_layer=False), n_labels)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-6)
        return self.head(self.dropout(pooled))


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    os.environ.setdefault("PYTHONHASHSEED", str(seed))
    torch.use_deterministic_algorithms(True, warn_only=True)


def load_tokenizer(path: Path, max_length: int) -> Tokenizer:
    tok = Tokenizer.from_file(str(path))
    tok.no_padding()
    tok.enable_truncation(max_length)
    return tok


def _batches(lengths: Sequence[int], batch_size: int, rng: random.Random) -> list[list[int]]:
    """Shuffle, sort within chunks of 50 batches by length, cut into batches, shuffle the batches."""
    order = list(range(len(lengths)))
    rng.shuffle(order)
    chunk = batch_size * 50
    batches: list[list[int]] = []
    for start in range(0, len(order), chunk):
        part = sorted(order[start:start + chunk], key=lambda i: lengths[i])
        batches.extend(part[i:i + batch_size] for i in range(0, len(part), batch_size))
    rng.shuffle(batches)
    return batches


def _collate(ids: Sequence[Sequence[int]], rows: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(ids[i]) for i in rows)
    input_ids = torch.zeros((len(rows), width), dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for r, i in enumerate(rows):
        seq = ids[i]
        input_ids[r, :len(seq)] = torch.tensor(seq, dtype=torch.long)
        mask[r, :len(seq)] = 1
    return input_ids, mask


def _progress(**kwargs):
    interactive = sys.stderr.isatty()
    return tqdm(file=sys.stderr, mininterval=0.5 if interactive else 15.0, dynamic_ncols=True, **kwargs)


def _extended(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Additive attention mask (batch, 1, 1, seq) for eager attention."""
    return (1.0 - mask[:, None, None, :].to(dtype)) * torch.finfo(dtype).min


@torch.no_grad()
def _lower_states(model: MeanPoolClassifier, ids: Sequence[Sequence[int]], n_frozen: int, batch_size: int = 64,
                  desc: str = "cache") -> list[torch.Tensor]:
    """Outputs of the embeddings and the lowest ``n_frozen`` layers, per example (its own length)."""
    encoder = model.encoder
    encoder.eval()
    device = next(model.parameters()).device
    out: list[torch.Tensor | None] = [None] * len(ids)
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    with _progress(total=len(ids), desc=desc, unit="ex") as bar:
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            input_ids, mask = (t.to(device) for t in _collate(ids, rows))
            hidden = encoder.embeddings(input_ids=input_ids)
            ext = _extended(mask, hidden.dtype)
            for layer in encoder.encoder.layer[:n_frozen]:
                hidden = layer(hidden, ext)
            for r, i in enumerate(rows):
                out[i] = hidden[r, :len(ids[i])].clone()
            bar.update(len(rows))
    return out  # type: ignore[return-value]


def _upper_forward(model: MeanPoolClassifier, states: list[torch.Tensor], rows: Sequence[int], n_frozen: int) -> torch.Tensor:
    width = max(states[i].shape[0] for i in rows)
    device = states[rows[0]].device
    hidden = torch.zeros((len(rows), width, states[rows[0]].shape[1]), device=device)
    mask = torch.zeros((len(rows), width), dtype=torch.long, device=device)
    for r, i in enumerate(rows):
        hidden[r, :states[i].shape[0]] = states[i]
        mask[r, :states[i].shape[0]] = 1
    ext = _extended(mask, hidden.dtype)
    for layer in model.encoder.encoder.layer[n_frozen:]:
        hidden = layer(hidden, ext)
    m = mask.unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * m).sum(dim=1) / m.sum(dim=1).clamp(min=1e-6)
    return model.head(model.dropout(pooled))


def train_device(requested: str | None = None) -> torch.device:
    """Where to fine-tune: ``cpu``, ``cuda`` (refused when torch sees no GPU) or ``auto`` (a GPU when there is one).

    Not part of a model's key, like the thread count: a GPU build of the same data is the same model version,
    with float differences in its weights, and its card records the device."""
    requested = (requested or os.environ.get("MESHWARD_TRAIN_DEVICE", "cpu")).strip().lower()
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if requested.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"MESHWARD_TRAIN_DEVICE={requested}, but torch {torch.__version__} sees no CUDA GPU: "
                           "unset it (or use 'auto') to train on the CPU")
    if requested != "cpu" and not requested.startswith("cuda"):
        raise ValueError(f"MESHWARD_TRAIN_DEVICE={requested!r}: use cpu, cuda, cuda:N or auto")
    return torch.device(requested)


def train(config: TrainConfig, labels: Sequence[str], texts: Sequence[str], targets: Sequence[int], base_dir: Path,
          *, desc: str = "train", device: torch.device | None = None) -> tuple[MeanPoolClassifier, dict[str, float]]:
    """Fine-tune on ``device`` (the CPU by default); returns the model on the CPU (eval mode) and a few training
    statistics."""
    device = device or torch.device("cpu")
    torch.set_num_threads(config.threads)
    seed = config.seed if config.train_seed is None else config.train_seed
    seed_everything(seed)
    tokenizer = load_tokenizer(base_dir / "tokenizer.json", config.max_length)
    ids = [e.ids for e in tokenizer.encode_batch(list(texts))]
    lengths = [len(x) for x in ids]
    model = MeanPoolClassifier.from_base(base_dir, len(labels))
    n_layers = len(model.encoder.encoder.layer)
    n_frozen = n_layers - config.train_top_layers if 0 < config.train_top_layers < n_layers else 0
    if config.freeze_embeddings or n_frozen:
        model.encoder.embeddings.word_embeddings.weight.requires_grad_(False)
    if n_frozen:
        for p in model.encoder.embeddings.parameters():
            p.requires_grad_(False)
        for layer in model.encoder.encoder.layer[:n_frozen]:
            for p in layer.parameters():
                p.requires_grad_(False)

    counts = np.bincount(np.asarray(targets), minlength=len(labels)).astype(np.float64)
    weights = (counts.sum() / np.maximum(counts, 1.0) / len(labels)) ** config.class_weight_power
    model.to(device)
    loss_fn = nn.CrossEntropyLoss(weight=torch.tensor(weights / weights.mean(), dtype=torch.float32, device=device),
                                  label_smoothing=config.label_smoothing)

    no_decay = ("bias", "LayerNorm.weight", "LayerNorm.bias")
    encoder_params = [(n, p) for n, p in model.encoder.named_parameters() if p.requires_grad]
    groups = [
        {"params": [p for n, p in encoder_params if not any(k in n for k in no_decay)], "weight_decay": config.weight_decay},
        {"params": [p for n, p in encoder_params if any(k in n for k in no_decay)], "weight_decay": 0.0},
        {"params": list(model.head.parameters()), "weight_decay": 0.0, "lr": config.head_lr},
    ]
    optimizer = torch.optim.AdamW(groups, lr=config.lr)
    rng = random.Random(seed)
    steps_per_epoch = math.ceil(len(texts) / config.batch_size)
    total = steps_per_epoch * config.epochs
    warmup = max(1, int(total * config.warmup_ratio))

    def schedule(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (total - step) / max(1, total - warmup))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    y = torch.tensor(list(targets), dtype=torch.long, device=device)
    started = time.perf_counter()
    states = _lower_states(model, ids, n_frozen, desc=f"{desc}: layers 1-{n_frozen}") if n_frozen else None
    cached_seconds = round(time.perf_counter() - started, 1)
    model.train()
    if n_frozen:  # frozen parts stay deterministic (no dropout): they were cached in eval mode
        model.encoder.embeddings.eval()
        for layer in model.encoder.encoder.layer[:n_frozen]:
            layer.eval()
    trainable = [p for p in model.parameters() if p.requires_grad]
    step = 0
    last_loss = float("nan")
    with _progress(total=total, desc=desc, unit="step") as bar:
        for epoch in range(config.epochs):
            running, seen = 0.0, 0
            for rows in _batches(lengths, config.batch_size, rng):
                if states is not None:
                    logits = _upper_forward(model, states, rows, n_frozen)
                else:
                    input_ids, mask = (t.to(device) for t in _collate(ids, rows))
                    logits = model(input_ids, mask)
                loss = loss_fn(logits, y[rows])
                loss.backward()
                torch.nn.utils.clip_grad_norm_(trainable, 1.0)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                running += loss.detach().item() * len(rows)
                seen += len(rows)
                step += 1
                bar.update(1)
                bar.set_postfix(epoch=f"{epoch + 1}/{config.epochs}", loss=f"{running / seen:.4f}", refresh=False)
            last_loss = running / max(1, seen)
    model.eval()
    model.cpu()
    return model, {"train_seconds": round(time.perf_counter() - started, 1), "cache_seconds": cached_seconds,
                   "device": device.type,
                   "steps": step, "trained_layers": n_layers - n_frozen, "final_epoch_loss": round(last_loss, 4),
                   "train_examples": len(texts)}


@torch.no_grad()
def predict_logits(model: MeanPoolClassifier, tokenizer: Tokenizer, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
    model.eval()
    ids = [e.ids for e in tokenizer.encode_batch(list(texts))]
    out = np.zeros((len(texts), model.head.out_features), dtype=np.float32)
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    for start in range(0, len(order), batch_size):
        rows = order[start:start + batch_size]
        input_ids, mask = _collate(ids, rows)
        out[rows] = model(input_ids, mask).float().numpy()
    return out
