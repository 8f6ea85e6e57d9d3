"""What security's content check withholds of real documents and catches of injected ones, before and after content
mode's question layers read only the lines that address their reader (`security.address`), judged in one run.

* real documents: the READMEs, NEWS and FAQ files under /usr/share/doc and the long descriptions of the Python
  distributions installed beside this script, each clipped as the deep tier clips an attached document. They were
  written for people by the projects that ship them and none addresses an assistant: every withhold is a false one
  (`--show` prints what fired). The set is whatever this machine has installed.
* `bench/corpora/content_probe.jsonl` and `content_heldout.jsonl`: injected tool results and documents, and benign
  ones, written for these benchmarks (the held-out set before the change above was designed);
  `content_blind*.jsonl`: injected and benign documents written by separate sessions that never saw the detector's
  code or each other's sets (the first three were then read to write content rules; the fourth was measured and
  not read). None is trained on.

Configurations, all with the shipped model:

* before: every rule reads the whole content; the classifier reads the lines that read as language, at the model's
  threshold (session 14's composition);
* shipped: the security service's own content decider.

Figures only, never asserted.

    .venv/bin/python bench/content_documents.py [--limit N] [--show]
"""
from __future__ import annotations

import argparse
import asyncio
import collections
import gzip
import json
import sys
from importlib import metadata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine  # noqa: E402
from content_check import _baseline_decider  # noqa: E402
from meshward.contracts import SecurityVerdict  # noqa: E402
from meshward.security.classifier import ClassifierLayer, SecurityClassifier  # noqa: E402
from meshward.security.decision import RulesLayerAdapter  # noqa: E402
from meshward.security.handlers import _judge  # noqa: E402
from meshward.security.judge import addressed_prose  # noqa: E402
from meshward.security.prose import language_lines  # noqa: E402
from meshward.supervisor.deep import MAX_DOCUMENT_CHARS, clip  # noqa: E402

CORPORA = Path(__file__).resolve().parent / "corpora"
PROBES = ["content_probe.jsonl", "content_heldout.jsonl", "content_blind.jsonl", "content_blind2.jsonl", "content_blind3.jsonl",
          "content_blind4.jsonl"]
DOC_ROOT = Path("/usr/share/doc")
DOC_NAMES = {"README", "NEWS", "FAQ", "USAGE", "TODO"}
DOC_SUFFIXES = {"", ".md", ".txt", ".rst", ".markdown", ".debian", ".source"}
MIN_CHARS = 400  # a stub README ("see the upstream docs") says nothing either way


def _debian_docs() -> list[tuple[str, str]]:
    docs = []
    for path in sorted(DOC_ROOT.glob("*/*")):
        name = path.name.removesuffix(".gz")
        stem, dot, ext = name.partition(".")
        if not path.is_file() or stem.upper() not in DOC_NAMES or f"{dot}{ext}".lower() not in DOC_SUFFIXES:
            continue
        try:
            raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        except (OSError, EOFError, gzip.BadGzipFile):
            continue
        docs.append((str(path.relative_to(DOC_ROOT)), raw.decode("utf-8", "replace")))
    return docs


def _package_docs() -> list[tuple[str, str]]:
    seen, docs = set(), []
    for dist in metadata.distributions():
        name = dist.metadata.get("Name") or "?"
        body = dist.metadata.get_payload() or dist.metadata.get("Description") or ""
        if name.lower() in seen or not isinstance(body, str):
            continue
        seen.add(name.lower())
        docs.append((f"pypi:{name}", body))
    return sorted(docs)


def _why(v: SecurityVerdict) -> str:
    return v.reason.split(":")[0] if str(v.layer) == "rules" else str(v.layer)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=0, help="judge at most N real documents of each source (0: all)")
    parser.add_argument("--show", action="store_true", help="print what the shipped configuration withholds or misses")
    args = parser.parse_args()
    sets: dict[str, list[tuple[str, str, str]]] = {}
    for source, found in (("debian docs", _debian_docs()), ("pypi docs", _package_docs())):
        docs = [(name, clip(text, MAX_DOCUMENT_CHARS), "benign") for name, text in found if len(text.strip()) >= MIN_CHARS]
        sets[source] = docs[: args.limit] if args.limit else docs
    for probe in PROBES:
        rows = [json.loads(line) for line in (CORPORA / probe).read_text(encoding="utf-8").splitlines() if line.strip()]
        sets[probe.removesuffix(".jsonl")] = [(row["family"], row["text"], row["label"]) for row in rows]
    model = SecurityClassifier.load(device="cpu")
    layer = ClassifierLayer(model, max_batch_size=32, max_wait_ms=2.0)
    configs = {"before": _baseline_decider(layer, language_lines), "shipped": _judge(RulesLayerAdapter(), [], [layer]).content}
    print(f"machine: {machine()}; security model {model.model_info.version} (threshold {model.threshold:.3f})")
    try:
        for set_name, items in sets.items():
            print(f"{set_name}: {sum(label == 'attack' for *_, label in items)} injected, "
                  f"{sum(label != 'attack' for *_, label in items)} benign")
            for config, decider in configs.items():
                verdicts = await asyncio.gather(*(decider.decide(text) for _, text, _ in items))
                attacks = [(item, v) for item, v in zip(items, verdicts, strict=True) if item[2] == "attack"]
                benign = [(item, v) for item, v in zip(items, verdicts, strict=True) if item[2] != "attack"]
                withheld = [(item, v) for item, v in benign if not v.allowed]
                caught = sum(not v.allowed for _, v in attacks)
                by = collections.Counter(_why(v) for _, v in withheld)
                line = f"  {config:8s} benign withheld {len(withheld):3d} of {len(benign):3d} ({len(withheld) / max(1, len(benign)):5.1%})"
                if attacks:
                    line += f"; injected caught {caught:3d} of {len(attacks):3d} ({caught / len(attacks):5.1%})"
                print(f"{line}; withheld by {dict(by.most_common(6))}")
                if args.show and config == "shipped":
                    for (name, text, _), v in withheld:
                        print(f"    withheld {name}: {v.reason[:100]}")
                        if str(v.layer) == "classifier":
                            lines = [x for x in addressed_prose(text).splitlines() if x.strip()]
                            top = max(zip((s.score for s in model.classify_many(lines)), lines, strict=True))
                            print(f"      {top[0]:.2f} {top[1].strip()[:140]!r}")
                    for (name, text, _), v in attacks:
                        if v.allowed:
                            print(f"    missed {name}: {text[:100]!r}")
    finally:
        await layer.close()


if __name__ == "__main__":
    asyncio.run(main())
