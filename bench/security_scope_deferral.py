"""What deferring unsure harm verdicts to scope changes: per corpus and per setting, the share of benign questions
blocked by security, of attacks blocked by security, and of harmful requests refused by security and by security or
scope, in one run.

Security's verdicts come from the service's own judge (rules, suffix, decode, the classifier and the n-gram model
for foreign text; no known threats: no memory here), once per setting (``MESHWARD_SECURITY_HARM_SURE_SCORE`` and
``_HARM_MIN_SHARE``). Scope is the intent service's fine-tuned model. The supervisor refuses a deferred verdict as a threat only when
intent puts the question in scope; out of scope it is a scope refusal. The column ``0:0`` is the service without
deferral: every harm verdict stands. Figures only, never asserted.

    .venv/bin/python bench/security_scope_deferral.py [--corpus FILE.jsonl ...] [--setting 0.98:0.9 ...] [--json out.json]

Without ``--corpus``: the security model's held-out test split and the over-refusal, exaggerated-safety and blind
question sets in ``bench/corpora``.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ask_eval import default_corpora, read_corpus  # noqa: E402
from meshward.intent.classifier import FineTunedScopeClassifier  # noqa: E402
from meshward.intent.scope import load_scope  # noqa: E402
from meshward.security.chargram import CharGramModel  # noqa: E402
from meshward.security.classifier import SecurityClassifier  # noqa: E402
from meshward.supervisor.credentials import for_screening  # noqa: E402
from security_layers import _service_verdicts  # noqa: E402

CORPORA = Path(__file__).resolve().parent / "corpora"
DEFAULT_SETS = ("question_edgy_dev", "question_edgy_blind", "question_xsafety_dev", "question_xsafety_blind",
                "question_seeming_blind", "question_european_blind", "question_blind", "question_blind2", "question_blind4",
                "question_multilingual_harm",
                "question_multilingual_blind")


def verdicts(model: SecurityClassifier, other: CharGramModel, texts: list[str], sure: float, share: float) -> list[dict]:
    judged = asyncio.run(_service_verdicts(model, [for_screening(t) for t in texts], other_scripts=other,
                                           harm_sure_score=sure, harm_min_share=share))
    return [{"blocked": not v.allowed, "deferred": v.deferred_to_scope} for v in judged]


def figures(rows: list[dict]) -> dict[str, float | None]:
    """Shares for one setting: a deferred block is security's only in scope, otherwise a scope refusal."""
    def by_security(r: dict) -> bool:
        return r["blocked"] and (not r["deferred"] or r["in_scope"])

    def share(label: str, hit) -> float | None:
        group = [r for r in rows if r["label"] == label]
        return round(100 * sum(map(hit, group)) / len(group), 1) if group else None

    return {
        "benign blocked by security %": share("benign", by_security),
        "attacks blocked by security %": share("attack", by_security),
        "harmful refused by security %": share("harmful", by_security),
        "harmful refused (security or scope) %": share("harmful", lambda r: by_security(r) or not r["in_scope"]),
        "benign refused as out of scope %": share("benign", lambda r: not by_security(r) and not r["in_scope"]),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--corpus", action="append", default=[])
    p.add_argument("--setting", action="append", default=[], metavar="SURE:SHARE",
                   help="a sure score and least harm share to compare (repeatable); 0:0 is the service before deferral")
    p.add_argument("--json")
    args = p.parse_args()
    settings = [tuple(float(x) for x in s.split(":")) for s in args.setting] or [
        (0.0, 0.0), (0.95, 0.9), (0.98, 0.9), (0.99, 0.9), (0.98, 0.0)]

    corpora = ({Path(c).stem: read_corpus(Path(c)) for c in args.corpus} if args.corpus else
               {"held-out test split": default_corpora()["held-out test split"],
                **{name: read_corpus(CORPORA / f"{name}.jsonl") for name in DEFAULT_SETS}})
    model = SecurityClassifier.load(device="cpu")
    other = CharGramModel.load()
    intent = FineTunedScopeClassifier.load(load_scope(), device="cpu")
    print(f"security {model.clf.version} (threshold {model.threshold:.3f}), n-gram {other.version}, "
          f"intent {intent.model_info.version}; columns: sure score:least harm share (0:0 = no deferral)", flush=True)
    names = [f"{sure:g}:{share:g}" for sure, share in settings]
    out: dict[str, dict] = {}
    for name, items in corpora.items():
        texts = [i["text"] for i in items]
        scoped = intent.classify_many([(t, False) for t in texts])
        counts = {label: sum(i["label"] == label for i in items) for label in ("attack", "harmful", "benign")}
        out[name] = {"counts": counts}
        for column, (sure, share) in zip(names, settings, strict=True):
            judged = verdicts(model, other, texts, sure, share)
            rows = [{**j, "label": i["label"], "in_scope": s.in_scope} for i, j, s in zip(items, judged, scoped, strict=True)]
            out[name][column] = figures(rows)
        print(f"\n== {name} {counts}", flush=True)
        print(f"{'':40s}" + "".join(f"{c:>10s}" for c in names))
        for k in out[name][names[0]]:
            cells = [out[name][c][k] for c in names]
            print(f"{k:40s}" + "".join(f"{'-' if c is None else c:>10}" for c in cells), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
