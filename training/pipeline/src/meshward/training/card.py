"""The model card: card.json (machine-readable; the runtime reads labels, threshold and temperature from it)
and README.md (the same facts for people)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["render_markdown", "write_card"]


def write_card(directory: Path, card: dict[str, Any]) -> None:
    (directory / "card.json").write_text(json.dumps(card, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    (directory / "README.md").write_text(render_markdown(card), encoding="utf-8")


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


_RATES = ("recall", "accuracy", "fpr", "precision")


def _pct(x: Any) -> str:
    return f"{100 * float(x):.2f}%" if isinstance(x, int | float) else str(x)


def render_markdown(card: dict[str, Any]) -> str:
    lines = [f"# Model card: {card['name']} {card['version']}", "", card.get("description", ""), ""]
    lines += _table(["field", "value"], [
        ["model version", card["version"]],
        ["key (hash of data, training code, hyper-parameters, base model, preprocessing)", card["key"]],
        ["preprocessing (checked by the service)", f"{card.get('preprocessing', {}).get('name')} "
                                                   f"v{card.get('preprocessing', {}).get('version')}"],
        ["data hash", card["data"]["hash"]],
        ["base model", f"{card['base_model']['name']} ({card['base_model']['fingerprint']})"],
        ["labels", ", ".join(card["labels"])],
        ["max sequence length", card["max_length"]],
        ["temperature (calibrated)", card["calibration"]["temperature"]],
        ["operating point", json.dumps(card.get("operating", {}))],
        ["training time", f"{card['training']['train_seconds']} s ({card['training']['steps']} steps, "
                          f"{card['training'].get('threads')} threads)"],
        ["built in", f"{card['training'].get('build_seconds')} s"],
        ["torch / transformers / onnx opset", f"{card['training'].get('torch')} / {card['training'].get('transformers')} / "
                                              f"{card['export']['opset']}"],
    ])
    lines += ["", "## Data", "", card["data"].get("how", ""), ""]
    splits = card["data"]["splits"]
    labels = card["labels"]
    lines += _table(["split", *labels, "groups"],
                    [[s, *[splits[s]["labels"].get(lb, 0) for lb in labels], splits[s]["groups"]] for s in splits])
    lines += ["", "Sources: " + ", ".join(f"{k} {v}" for k, v in card["data"].get("sources", {}).items()), ""]
    metrics = card["metrics"]
    for split in ("test", "calib"):
        if split not in metrics:
            continue
        m = metrics[split]
        lines += [f"## Metrics on the held-out {split} split (int8 ONNX model, run-time pre-processing)", ""]
        lines += [f"- {k}: {_pct(v) if any(w in k for w in _RATES) else v}" for k, v in m.get("headline", {}).items()]
        lines += [""]
        lines += _table(["class", "precision", "recall", "f1", "support"],
                        [[lb, r["precision"], r["recall"], r["f1"], r["support"]] for lb, r in m["per_class"].items()])
        lines += ["", "Confusion matrix (rows: true, columns: predicted):", ""]
        lines += _table(["true \\ predicted", *labels], [[lb, *row] for lb, row in zip(labels, m["confusion"], strict=True)])
        lines += [""]
    for name, ext in card.get("external", {}).items():
        lines += [f"## External check: {name}", "", ext.get("note", ""), ""]
        lines += [f"- {k}: {v}" for k, v in ext.items() if k != "note"]
        lines += [""]
    if card.get("parity"):
        lines += ["## ONNX parity with torch", ""] + [f"- {k}: {v}" for k, v in card["parity"].items()] + [""]
    if card.get("gates"):
        lines += ["## Quality gates", ""] + [f"- {g['gate']}: {'PASS' if g['ok'] else 'FAIL'} ({g['value']})"
                                              for g in card["gates"]] + [""]
    lines += ["## Files", ""] + _table(["file", "bytes", "sha256"],
                                        [[f, v["bytes"], v["sha256"][:16]] for f, v in card["export"]["files"].items()])
    lines += ["", "## Training configuration", "", "```json", json.dumps(card["training"]["config"], indent=2), "```", ""]
    return "\n".join(lines)
