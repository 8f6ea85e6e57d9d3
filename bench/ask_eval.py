"""Security evaluation through `POST /v1/ask` on the whole system, as a user (or an independent evaluator) asks.

Starts the launcher's system (`make up`'s defaults: fine-tuned classifiers, known threats learning from blocks,
memory), sends every text of each corpus as a new conversation and counts what the response says: refused by
security (`refusal_reason == "security"`), refused as out of scope, or answered. Per corpus and per family: the
share of attacks blocked by security, of harmful requests refused (security or scope) and of benign questions
blocked by security. Figures only, never asserted.

Corpora: JSON lines with `text`, `label` (`attack`, `harmful` or `benign`) and optionally `family`, given with
`--corpus` (repeatable; an evaluator's own corpora go here); without any, the security model's held-out test
split (templates never trained on) and bastioncorpus (never trained on), when the training package is installed.

    .venv/bin/python bench/ask_eval.py [--corpus FILE.jsonl ...] [--limit N] [--clients 8] [--deep-tier] [--json out.json]

The deep tier is off by default (`MESHWARD_DEEP_TIER=false`): security decides before any tier, and a CPU model
would take minutes per open question; `--deep-tier` keeps it on.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx  # noqa: E402
from _common import NO_RATE_LIMIT, machine  # noqa: E402
from meshward.devstack.launcher import Console, Stack  # noqa: E402
from meshward.devstack.nats_server import free_port  # noqa: E402

LABELS = ("attack", "harmful", "benign")
MAX_TEXT_CHARS = 20_000  # the question limit /v1/ask enforces is larger; corpora hold no longer texts


def read_corpus(path: Path) -> list[dict]:
    items = []
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            row = json.loads(line)
            if not isinstance(row.get("text"), str) or row.get("label") not in LABELS:
                raise SystemExit(f"{path}:{n}: each line needs a string `text` and `label` in {LABELS}")
            items.append({"text": row["text"][:MAX_TEXT_CHARS], "label": row["label"],
                          "family": str(row.get("family") or "-")})
    return items


def default_corpora() -> dict[str, list[dict]]:
    """Texts the shipped model never trained on: its held-out test split and the external corpora."""
    try:
        from meshward.security_training import held_out_splits
        from meshward.security_training.data import BENIGN, build_examples, external_sets, family_of
    except ModuleNotFoundError:
        raise SystemExit("no --corpus given and the training package is not installed: run `make install`") from None
    examples, _ = build_examples()
    test = held_out_splits(examples)["test"]
    out = {"held-out test split": [
        {"text": e.text, "family": family_of(e.group) or e.group.split(":")[0],
         "label": "benign" if e.label == BENIGN else "harmful" if e.label == "harmful_content" else "attack"}
        for e in test]}
    for name, rows in external_sets().items():
        out[name] = [{"text": t, "label": "attack" if a else "benign", "family": "-"} for t, a in rows]
    return out


async def ask_all(url: str, items: list[dict], clients: int, progress: str) -> list[dict]:
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(len(items)):
        queue.put_nowait(i)
    results: list[dict] = [{} for _ in items]
    done = 0
    started = time.monotonic()

    async def worker(http: httpx.AsyncClient) -> None:
        nonlocal done
        while not queue.empty():
            i = queue.get_nowait()
            try:
                r = await http.post("/v1/ask", json={"question": items[i]["text"]})
                body = r.json() if r.headers.get("content-type", "").startswith("application/json") else {}
                results[i] = {"http": r.status_code, "status": body.get("status"), "refusal": body.get("refusal_reason"),
                              "category": body.get("threat_category"), "layer": body.get("decided_by")}
            except httpx.HTTPError as e:
                results[i] = {"http": 0, "status": "transport", "error": type(e).__name__}
            done += 1
            if done % 100 == 0:
                print(f"  {progress}: {done}/{len(items)} ({done / (time.monotonic() - started):.1f}/s)", flush=True)

    async with httpx.AsyncClient(base_url=url, timeout=180, limits=httpx.Limits(max_connections=clients + 2)) as http:
        await asyncio.gather(*(worker(http) for _ in range(clients)))
    return results


def report(name: str, items: list[dict], results: list[dict]) -> dict:
    by_label: dict[str, Counter] = defaultdict(Counter)
    by_family: dict[tuple[str, str], Counter] = defaultdict(Counter)
    layers: Counter = Counter()
    errors: list[dict] = []
    for item, r in zip(items, results, strict=True):
        outcome = ("security" if r.get("refusal") == "security" else "scope" if r.get("refusal") == "out_of_scope"
                   else "error" if r.get("status") not in ("answered", "awaiting_approval") else "answered")
        by_label[item["label"]][outcome] += 1
        by_family[(item["label"], item["family"])][outcome] += 1
        if outcome == "security":
            layers[f"{item['label']}:{r.get('layer')}"] += 1
        elif outcome == "error":
            errors.append({"text": item["text"][:300], "family": item["family"], "http": r.get("http"),
                           "status": r.get("status"), "error": r.get("error")})
    out: dict = {"corpus": name, "n": len(items), "labels": {}, "families": {}, "deciding_layers": dict(layers),
                 "benign_blocked": [{"text": i["text"][:300], "family": i["family"], "layer": r.get("layer")}
                                    for i, r in zip(items, results, strict=True)
                                    if i["label"] == "benign" and r.get("refusal") == "security"],
                 "errors": errors}
    print(f"\n== {name}: {len(items)} texts")
    for label in LABELS:
        c = by_label.get(label)
        if not c:
            continue
        n = sum(c.values())
        row = {"n": n, "blocked_by_security": c["security"] / n, "refused_any": (c["security"] + c["scope"]) / n,
               "errors": c["error"]}
        out["labels"][label] = row
        what = {"attack": "attacks blocked by security", "harmful": "harmful refused (security or scope)",
                "benign": "benign blocked by security"}[label]
        share = row["refused_any"] if label == "harmful" else row["blocked_by_security"]
        extra = f"; security itself {row['blocked_by_security']:.1%}" if label == "harmful" else ""
        extra += f"; refused as out of scope {c['scope'] / n:.1%}" if label == "benign" else ""
        print(f"  {what}: {share:.1%} of {n}{extra}; errors {c['error']}")
    families = sorted(by_family.items(), key=lambda kv: (kv[0][0], kv[0][1]))
    if len(families) > len(by_label):
        print("  by family (label family: blocked by security / n):")
        for (label, family), c in families:
            n = sum(c.values())
            out["families"][f"{label}:{family}"] = {"n": n, "security": c["security"], "scope": c["scope"]}
            print(f"    {label:7} {family:32} {c['security']:>4}/{n:<4} {c['security'] / n:6.1%}")
    print(f"  deciding layers of blocks: {dict(layers)}")
    if out["errors"]:
        kinds = Counter(f"{e['http']} {e['status']}" for e in out["errors"])
        print(f"  errors (http status): {dict(kinds)}; first: {out['errors'][0]['text'][:100]!r}")
    return out


async def main_async(args) -> None:
    corpora = {Path(p).name: read_corpus(Path(p)) for p in args.corpus} if args.corpus else default_corpora()
    if args.limit:
        rng = random.Random(7)
        corpora = {k: rng.sample(v, min(args.limit, len(v))) for k, v in corpora.items()}
    data = Path(tempfile.mkdtemp(prefix="meshward-ask-eval-"))
    port = free_port()
    env = {"MESHWARD_LOG_LEVEL": "WARNING", "MESHWARD_MCP_PORT": str(free_port()), **NO_RATE_LIMIT,
           "MESHWARD_DEEP_TIER": "true" if args.deep_tier else "false"}
    with open(data / "stack.log", "w") as log:
        stack = Stack(data, port, None, Console(log), extra_env=env)
        await stack.start()
        try:
            if not await stack.wait_healthy():
                raise SystemExit(f"the system did not become healthy: see {data / 'stack.log'}")
            print(f"machine: {machine()}; load average {os.getloadavg()[0]:.1f}; deep tier {'on' if args.deep_tier else 'off'}")
            reports = []
            for name, items in corpora.items():
                results = await ask_all(f"http://127.0.0.1:{port}", items, args.clients, name)
                reports.append(report(name, items, results))
            if args.json:
                Path(args.json).write_text(json.dumps(reports, indent=1))
        finally:
            await stack.stop()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--corpus", action="append", default=[], help="JSON lines: text, label (attack|harmful|benign), family?")
    p.add_argument("--limit", type=int, default=0, help="at most N texts per corpus (a seeded sample)")
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--deep-tier", action="store_true")
    p.add_argument("--json")
    args = p.parse_args()
    if not 1 <= args.clients <= 64 or args.limit < 0:
        p.error("clients 1..64, limit >= 0")
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
