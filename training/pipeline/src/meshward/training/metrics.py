"""Evaluation helpers (numpy only): confusion matrix, per-class precision/recall, recall at a false-positive
rate, temperature scaling, expected calibration error."""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = [
    "confusion_matrix",
    "expected_calibration_error",
    "fit_temperature",
    "nll",
    "per_class_report",
    "rate_at_threshold",
    "recall_at_fpr",
    "threshold_for_fpr",
]


def confusion_matrix(y_true: Sequence[int], y_pred: Sequence[int], n_classes: int) -> np.ndarray:
    cm = np.zeros((n_classes, n_classes), dtype=np.int64)
    for t, p in zip(y_true, y_pred, strict=True):
        cm[int(t), int(p)] += 1
    return cm


def per_class_report(cm: np.ndarray, labels: Sequence[str]) -> dict[str, dict[str, float]]:
    report: dict[str, dict[str, float]] = {}
    for i, label in enumerate(labels):
        tp = float(cm[i, i])
        predicted = float(cm[:, i].sum())
        actual = float(cm[i, :].sum())
        precision = tp / predicted if predicted else 0.0
        recall = tp / actual if actual else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        report[label] = {"precision": round(precision, 4), "recall": round(recall, 4), "f1": round(f1, 4),
                         "support": int(actual)}
    return report


def threshold_for_fpr(neg_scores: np.ndarray, max_fpr: float) -> float:
    """The lowest threshold t such that the share of negatives scoring >= t is at most ``max_fpr``."""
    neg = np.sort(np.asarray(neg_scores, dtype=np.float64))[::-1]
    if neg.size == 0:
        return 0.5
    k = int(math.floor(max_fpr * neg.size + 1e-9))  # negatives allowed above the threshold
    if k >= neg.size:
        return float(neg[-1])
    return float(np.nextafter(neg[k], np.inf))


def threshold_for_recall(pos_scores: np.ndarray, min_recall: float) -> float:
    """The highest threshold t such that the share of positives scoring >= t is at least ``min_recall``."""
    pos = np.sort(np.asarray(pos_scores, dtype=np.float64))[::-1]
    if pos.size == 0:
        return 0.5
    k = max(1, int(math.ceil(min_recall * pos.size - 1e-9)))  # positives that must score >= t
    return float(pos[min(k, pos.size) - 1])


def rate_at_threshold(scores: np.ndarray, threshold: float) -> float:
    scores = np.asarray(scores, dtype=np.float64)
    return float((scores >= threshold).mean()) if scores.size else 0.0


def recall_at_fpr(pos_scores: np.ndarray, neg_scores: np.ndarray, max_fpr: float) -> tuple[float, float]:
    """(recall of positives, threshold) at the ROC point where at most ``max_fpr`` of negatives score >= t."""
    t = threshold_for_fpr(neg_scores, max_fpr)
    return rate_at_threshold(pos_scores, t), t


def _log_softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


def nll(logits: np.ndarray, y: Sequence[int], temperature: float = 1.0) -> float:
    lp = _log_softmax(np.asarray(logits, dtype=np.float64) / temperature)
    return float(-lp[np.arange(len(y)), np.asarray(y)].mean())


def fit_temperature(logits: np.ndarray, y: Sequence[int], low: float = 0.05, high: float = 20.0) -> float:
    """Temperature scaling: the T minimising the negative log-likelihood (golden-section search on log T)."""
    if len(y) == 0:
        return 1.0
    a, b = math.log(low), math.log(high)
    g = (math.sqrt(5) - 1) / 2
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = nll(logits, y, math.exp(c)), nll(logits, y, math.exp(d))
    for _ in range(60):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = nll(logits, y, math.exp(c))
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = nll(logits, y, math.exp(d))
    return round(math.exp((a + b) / 2), 4)


def expected_calibration_error(probs: np.ndarray, y: Sequence[int], bins: int = 10) -> float:
    probs = np.asarray(probs)
    if probs.size == 0:
        return 0.0
    conf = probs.max(axis=1)
    correct = (probs.argmax(axis=1) == np.asarray(y)).astype(np.float64)
    edges = np.linspace(0.0, 1.0, bins + 1)
    ece = 0.0
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        sel = (conf > lo) & (conf <= hi)
        if sel.any():
            ece += sel.mean() * abs(correct[sel].mean() - conf[sel].mean())
    return round(float(ece), 4)
