"""Training hyper-parameters (torch-free: they are part of a model's cache key)."""
from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = ["TrainConfig"]


@dataclass(frozen=True)
class TrainConfig:
    seed: int = 13
    epochs: int = 4
    batch_size: int = 32
    lr: float = 5e-5
    head_lr: float = 1e-3
    weight_decay: float = 0.01
    warmup_ratio: float = 0.06
    max_length: int = 128
    freeze_embeddings: bool = True  # the word-piece table stays as pretrained (faster; keeps rare-language pieces)
    # Fine-tune only the top N transformer layers (0: all). The frozen lower layers run once per example and
    # their output is cached, so an epoch costs about N/6 of a full fine-tuning epoch on a busy 2-core CPU.
    train_top_layers: int = 2
    class_weight_power: float = 0.5  # loss weight ~ (1/frequency)^power: 0 = none, 1 = fully balanced
    label_smoothing: float = 0.05
    # Seeds the fine-tuning (initial head, batch order, dropout) apart from the split; None: ``seed``. Varying it
    # alone measures how much a figure moves between runs on the same held-out split.
    train_seed: int | None = None
    threads: int = 2

    def as_dict(self) -> dict[str, object]:
        return asdict(self)
