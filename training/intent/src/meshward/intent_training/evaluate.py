"""Intent-specific evaluation: the calibrated in-scope threshold, in-scope accuracy, out-of-scope recall."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["decide", "gates", "headline", "operating_point", "score"]

MIN_OOS_RECALL = 0.92  # on calib: the threshold must refuse at least this share of out-of-scope questions
_GRID = np.round(np.arange(0.20, 0.951, 0.01), 2)


def score(clf: Any, texts: Sequence[str]) -> np.ndarray:
    return clf.predict_proba([" ".join(t.split()) for t in texts])


def decide(probs: np.ndarray, threshold: float) -> np.ndarray:
    """Predicted label index per row: the best intent when 1 - p(out_of_scope) >= threshold, else out_of_scope."""
    oos = probs.shape[1] - 1
    best = probs[:, :oos].argmax(axis=1)
    return np.where(1.0 - probs[:, oos] >= threshold, best, oos)


def _rates(probs: np.ndarray, y: Sequence[int], threshold: float) -> tuple[float, float]:
    y = np.asarray(y)
    oos = probs.shape[1] - 1
    pred = decide(probs, threshold)
    ins = y != oos
    in_acc = float((pred[ins] == y[ins]).mean()) if ins.any() else 0.0
    oos_recall = float((pred[~ins] == oos).mean()) if (~ins).any() else 0.0
    return in_acc, oos_recall


def operating_point(probs: np.ndarray, y: list[int]) -> dict[str, Any]:
    """The middle of the thresholds with the best in-scope accuracy among those that refuse >= 92% of the
    out-of-scope calib questions.

    In-scope accuracy comes first (a wrongly refused question is the assistant failing its user; attacks are
    the security service's job), with a floor on out-of-scope recall above its 90% target. With ~100
    questions per side in calib, the best accuracy is a plateau: its middle transfers to unseen questions,
    while either end sits on one calib question.
    """
    scored = [(float(t), *_rates(probs, y, float(t))) for t in _GRID]
    ok = [s for s in scored if s[2] >= MIN_OOS_RECALL] or [max(scored, key=lambda s: s[2])]
    best = max(s[1] for s in ok)
    plateau = [s for s in ok if s[1] >= best - 1e-9]
    t, in_acc, oos_recall = plateau[len(plateau) // 2]
    return {"threshold": t, "score": "1 - p(out_of_scope), temperature-scaled",
            "chosen_on": (f"calib split: middle of the thresholds with the best in-scope accuracy among those with "
                          f"OOS recall >= {MIN_OOS_RECALL}"),
            "calib_in_scope_accuracy": round(in_acc, 4), "calib_oos_recall": round(oos_recall, 4)}


def headline(probs: np.ndarray, y: list[int], operating: dict[str, Any]) -> dict[str, Any]:
    t = operating["threshold"]
    in_acc, oos_recall = _rates(probs, y, t)
    yy = np.asarray(y)
    oos = probs.shape[1] - 1
    pred = decide(probs, t)
    refused = pred == oos
    return {
        "in_scope": int((yy != oos).sum()),
        "out_of_scope": int((yy == oos).sum()),
        "in_scope_accuracy": round(in_acc, 4),
        "oos_recall": round(oos_recall, 4),
        "oos_precision": round(float((yy[refused] == oos).mean()) if refused.any() else 0.0, 4),
        "accuracy": round(float((pred == yy).mean()), 4),
        "threshold": t,
    }


def gates(test: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"gate": "in-scope accuracy >= 0.95 (held-out test)", "value": test["in_scope_accuracy"],
         "ok": test["in_scope_accuracy"] >= 0.95},
        {"gate": "out-of-scope recall >= 0.90 (held-out test)", "value": test["oos_recall"], "ok": test["oos_recall"] >= 0.90},
    ]
