"""How much the security model's held-out figures move between training runs of the same data and split.

Builds the security classifier once per training seed (``meshward train security --train-seed N``: same data,
same held-out split, a different initial head, batch order and dropout) into a scratch models folder, then prints
each build's figures from its card and their spread; the first seed is the baseline the others are compared with.
A figure that moves by more than a data change's effect across seeds cannot decide that change from one build.
With ``--ask``, each build also answers ``bench/ask_eval.py``'s default corpora (the held-out split, bastioncorpus,
jailbreak-corpus-mini) through ``POST /v1/ask`` on the whole system, so a data change is judged over seeds the way
the independent evaluation measures it.

On a 2-core CPU a build takes 15-25 minutes; with ``MESHWARD_TRAIN_DEVICE=cuda`` (a GPU torch) a few minutes, and
``--parallel`` builds several seeds at once. Figures only, never asserted.

    .venv/bin/python bench/security_seeds.py [--seeds 13 14 15] [--parallel 1] [--keep DIR] [--ask] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from statistics import mean

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine  # noqa: E402

FIGURES = (
    ("test r@1%", lambda c: c["metrics"]["test"]["headline"]["attack_recall_at_1pct_fpr"]),
    ("test r@2%", lambda c: c["metrics"]["test"]["headline"]["attack_recall_at_2pct_fpr"]),
    ("t@1%", lambda c: c["metrics"]["test"]["headline"]["threshold_at_1pct_fpr"]),
    ("no-chat r@1%", lambda c: c["external"]["held-out test split without chat"]["attack_recall_at_1pct_fpr"]),
    ("op. threshold", lambda c: c["operating"]["threshold"]),
    ("recall@op", lambda c: c["metrics"]["test"]["headline"]["attack_recall_at_operating_threshold"]),
    ("FPR@op", lambda c: c["metrics"]["test"]["headline"]["benign_fpr_at_operating_threshold"]),
    ("bastion r", lambda c: c["external"]["bastioncorpus 0.6.0"]["attack_recall_at_operating_threshold"]),
    ("bastion FPR", lambda c: c["external"]["bastioncorpus 0.6.0"]["benign_fpr_at_operating_threshold"]),
)


def build(seed: int, root: Path) -> tuple[dict, Path]:
    env = {**os.environ, "MESHWARD_MODELS_DIR": str(root / f"seed-{seed}")}
    started = time.perf_counter()
    cmd = [sys.executable, "-m", "meshward.security_training", "--train-seed", str(seed), "--print-dir", "--quiet"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"seed {seed}: the build failed:\n{done.stderr[-3000:]}")
    directory = Path(done.stdout.strip().splitlines()[-1])
    card = json.loads((directory / "card.json").read_text())
    print(f"  seed {seed}: built in {time.perf_counter() - started:.0f} s on {card['training'].get('device', 'cpu')}",
          flush=True)
    return card, directory


def through_ask(seed: int, directory: Path, scratch: Path) -> dict[str, float]:
    """Shares blocked by security through `/v1/ask` (harmful: refused by security or scope), per corpus and label."""
    out = scratch / f"ask-{seed}.json"
    env = {**os.environ, "MESHWARD_SECURITY_MODEL_DIR": str(directory)}
    cmd = [sys.executable, str(Path(__file__).with_name("ask_eval.py")), "--json", str(out)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"seed {seed}: the /v1/ask evaluation failed:\n{done.stderr[-3000:]}")
    rows: dict[str, float] = {}
    for corpus in json.loads(out.read_text()):
        name = corpus["corpus"].split(" ")[0]
        for label, figures in corpus["labels"].items():
            rows[f"ask {name} {label}"] = figures["refused_any" if label == "harmful" else "blocked_by_security"]
    print(f"  seed {seed}: answered through /v1/ask", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[13, 14, 15])
    parser.add_argument("--parallel", type=int, default=1, help="builds at a time (a GPU or many cores)")
    parser.add_argument("--keep", type=Path, help="build into this folder and keep it (default: a scratch folder)")
    parser.add_argument("--ask", action="store_true", help="also run bench/ask_eval.py's corpora on each build")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    print(f"security model, {len(args.seeds)} training seeds on one split; {machine()}; "
          f"MESHWARD_TRAIN_DEVICE={os.environ.get('MESHWARD_TRAIN_DEVICE', 'cpu')}", flush=True)
    with tempfile.TemporaryDirectory(prefix="meshward-seeds-") as scratch:
        root = args.keep or Path(scratch)
        with ThreadPoolExecutor(max_workers=max(1, args.parallel)) as pool:
            built = list(pool.map(lambda s: build(s, root), args.seeds))
        rows = {seed: {name: float(get(card)) for name, get in FIGURES}
                for seed, (card, _) in zip(args.seeds, built, strict=True)}
        if args.ask:  # one at a time: each run starts the whole system
            for seed, (_, directory) in zip(args.seeds, built, strict=True):
                rows[seed].update(through_ask(seed, directory, Path(scratch)))
    names = list(rows[args.seeds[0]])
    width = max(len(name) for name in names)
    print(f"{'':{width}}  " + "  ".join(f"seed {s:>4}" for s in args.seeds) + "      mean    spread   vs first")
    for name in names:
        values = [rows[s][name] for s in args.seeds]
        spread = max(values) - min(values)
        print(f"{name:{width}}  " + "  ".join(f"{v:9.4f}" for v in values)
              + f"  {mean(values):8.4f}  {spread:8.4f}  " + " ".join(f"{v - values[0]:+.4f}" for v in values[1:]))
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), "seeds": rows}, indent=2))


if __name__ == "__main__":
    main()
