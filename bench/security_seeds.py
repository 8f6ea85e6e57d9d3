"""How much the security model's held-out figures move between training runs of the same data and split.

Builds the security classifier once per training seed (``meshward train security --train-seed N``: same data,
same held-out split, a different initial head, batch order and dropout) into a scratch models folder, then prints
each build's figures from its card and their spread; the first seed is the baseline the others are compared with.
A figure that moves by more than a data change's effect across seeds cannot decide that change from one build.

On a 2-core CPU a build takes 15-25 minutes; with ``MESHWARD_TRAIN_DEVICE=cuda`` (a GPU torch) a few minutes, and
``--parallel`` builds several seeds at once. Figures only, never asserted.

    .venv/bin/python bench/security_seeds.py [--seeds 13 14 15] [--parallel 1] [--keep DIR] [--json out.json]
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


def build(seed: int, root: Path) -> dict:
    env = {**os.environ, "MESHWARD_MODELS_DIR": str(root / f"seed-{seed}")}
    started = time.perf_counter()
    cmd = [sys.executable, "-m", "meshward.security_training", "--train-seed", str(seed), "--print-dir", "--quiet"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"seed {seed}: the build failed:\n{done.stderr[-3000:]}")
    card = json.loads((Path(done.stdout.strip().splitlines()[-1]) / "card.json").read_text())
    print(f"  seed {seed}: built in {time.perf_counter() - started:.0f} s on {card['training'].get('device', 'cpu')}",
          flush=True)
    return card


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[13, 14, 15])
    parser.add_argument("--parallel", type=int, default=1, help="builds at a time (a GPU or many cores)")
    parser.add_argument("--keep", type=Path, help="build into this folder and keep it (default: a scratch folder)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    print(f"security model, {len(args.seeds)} training seeds on one split; {machine()}; "
          f"MESHWARD_TRAIN_DEVICE={os.environ.get('MESHWARD_TRAIN_DEVICE', 'cpu')}", flush=True)
    with tempfile.TemporaryDirectory(prefix="meshward-seeds-") as scratch:
        root = args.keep or Path(scratch)
        with ThreadPoolExecutor(max_workers=max(1, args.parallel)) as pool:
            cards = list(pool.map(lambda s: build(s, root), args.seeds))
    rows = {seed: {name: float(get(card)) for name, get in FIGURES} for seed, card in zip(args.seeds, cards, strict=True)}
    width = max(len(name) for name, _ in FIGURES)
    print(f"{'':{width}}  " + "  ".join(f"seed {s:>4}" for s in args.seeds) + "      mean    spread   vs first")
    for name, _ in FIGURES:
        values = [rows[s][name] for s in args.seeds]
        spread = max(values) - min(values)
        print(f"{name:{width}}  " + "  ".join(f"{v:9.4f}" for v in values)
              + f"  {mean(values):8.4f}  {spread:8.4f}  " + " ".join(f"{v - values[0]:+.4f}" for v in values[1:]))
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), "seeds": rows}, indent=2))


if __name__ == "__main__":
    main()
