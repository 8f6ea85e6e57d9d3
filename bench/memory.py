"""Memory benchmark: (a) how fast the memory service's durable consumer catches up on a backlog of
InteractionCompleted events, (b) semantic search over 10k stored interactions, (c) the cost of
context compression.

(a) N events are published to JetStream first, then the memory service starts in this process (fresh
SQLite file, fresh embedded Chroma, new durable consumer) and the store's row count is polled over
NATS (meshward.v1.memory.stats) until it holds all N. Run twice on fresh servers: events with status
"refused" (stored in SQL only) and "answered" (SQL, then the question embedded into Chroma, one event
at a time). The answered phase stops at --max-seconds if the backlog is not drained by then; the rate
is over what was stored.
(b) SemanticMemory on a fresh Chroma folder: --items synthetic questions inserted in batches (insert
rate, encoding included), then --queries searches (k=5): p50/p99, and the query-encoding share.
(c) ContextCompressor with the default budget (threshold 20k tokens, max 28k, keep last 5) and the
MiniLM tokenizer: ms per compress() for 10, 100 and 500 ordinary turns, and 10 long turns.
(d) the SQL store alone (SQLite file): CPU per question of MemoryStore.record_events, each group commit holding
1-4 questions' events (six routing decisions and one interaction each), the worker thread's CPU included.

OpenBLAS threads: the encoder is numpy; on a busy machine OpenBLAS' own threads can slow it by an order
of magnitude. --blas-threads N sets OPENBLAS_NUM_THREADS/OMP_NUM_THREADS before numpy loads (default:
left as the environment has it, as the service runs).

    .venv/bin/python bench/memory.py [--quick] [--events 2000] [--items 10000] [--blas-threads 1]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

# ---------------------------------------------------------------------------------------------- synthetic text
_TOPICS = [
    "the weather in Paris", "my IP address", "the NATS cluster", "a bar chart of sales", "the PDF invoice",
    "disk usage on the host", "the JetStream consumer", "the tools service", "the memory service", "a sine curve",
    "the quarterly report", "network latency", "the exchange rate", "the time in Tokyo", "square roots",
    "the security policy", "a histogram of response times", "the supervisor graph", "the deployment", "compound interest",
    "the wind forecast for Berlin", "the geolocation of an address", "the CPU load", "prime numbers", "the error budget",
    "memory usage of the database", "the DNS records", "the retry policy", "the audit log", "monthly rainfall",
]
_TEMPLATES = [
    "What is {t}?", "Can you explain {t} to me?", "How do I check {t}?", "Show me {t} {q}.", "Why did {t} change {q}?",
    "Give me a summary of {t} {q}.", "Is there a problem with {t}?", "Compare {t} with last week.", "Plot {t} {q}.",
    "Tell me more about {t}.", "How accurate is {t}?", "Where can I find {t}?", "What changed in {t} {q}?",
    "Please calculate something about {t}.", "Who is responsible for {t}?", "When was {t} last updated?",
    "List the details of {t} {q}.", "Help me understand {t} {q}.", "Describe {t} in one sentence.",
    "What should I know about {t} {q}?", "Can {t} be improved?", "Check {t} for errors {q}.",
    "Explain the trend in {t} {q}.", "What are the limits of {t}?", "Estimate {t} {q}.",
    "How is {t} measured?", "Is {t} normal {q}?", "Report on {t} {q}.", "Find anomalies in {t}.",
    "Summarise {t} for the team {q}.", "What is the forecast for {t}?", "Why is {t} slow {q}?",
    "Document {t} for me.", "How does {t} work?", "Break down {t} {q}.", "Remind me about {t}.",
    "Track {t} {q}.", "Audit {t} {q}.", "What affects {t}?", "Visualise {t} {q}.",
]
_QUALIFIERS = [
    "today", "this morning", "since Monday", "over the last hour", "for the last 30 days", "in production",
    "in staging", "after the upgrade", "before the release", "during the outage", "at peak time", "per region",
]
_QUERIES = [
    "weather forecast for a European capital", "how to see my public IP", "NATS server health", "chart of revenue",
    "read text from an invoice PDF", "free disk space", "consumer lag in JetStream", "tool call failed",
    "history of my conversation", "draw a trigonometric function", "finance report summary", "slow network",
    "currency conversion", "what time is it in Japan", "compute a square root", "security rules", "latency distribution",
    "agent routing", "rollout status", "interest on savings", "wind speed", "where is this address",
    "processor usage", "is 97 prime", "SLO burn rate", "database memory", "name resolution", "backoff", "who changed what",
    "rain statistics",
]
_SENTENCES = [
    "The {t} looked normal {q}.", "I checked {t} and found {n} items that need attention.",
    "The main cause was a configuration change in {t}.", "Compared with last week, {t} improved by {n} percent.",
    "You can find {t} in the dashboard under the reports tab.", "The value for {t} is {n}.",
    "There were no errors related to {t} {q}.", "A retry fixed the problem with {t} after {n} seconds.",
    "The team responsible for {t} was notified.", "Next, consider reviewing {t} {q}.",
]


def make_questions(n: int, seed: int = 7) -> list[str]:
    """`n` distinct questions from templates x topics x qualifiers (14,400 combinations), in a random order."""
    rng = random.Random(seed)
    combos = [(tpl, t, q) for tpl in _TEMPLATES for t in _TOPICS for q in _QUALIFIERS]
    rng.shuffle(combos)
    out, seen = [], set()
    for tpl, t, q in combos:
        text = tpl.format(t=t, q=q)
        if text not in seen:  # templates without {q} repeat across qualifiers
            seen.add(text)
            out.append(text)
        if len(out) == n:
            return out
    for i in range(n - len(out)):  # more than the distinct combinations: number them
        out.append(f"{out[i % len(out)]} (case {i})")
    return out


def make_answer(rng: random.Random, sentences: int) -> str:
    return " ".join(
        rng.choice(_SENTENCES).format(t=rng.choice(_TOPICS), q=rng.choice(_QUALIFIERS), n=rng.randint(2, 999))
        for _ in range(sentences)
    )


def make_turns(n: int, sentences: int, seed: int = 11) -> list[dict]:
    rng = random.Random(seed)
    questions = make_questions(max(n, 1), seed=seed)
    return [{"question": questions[i], "answer": make_answer(rng, sentences)} for i in range(n)]


# ---------------------------------------------------------------------------------------------- (a) consumer
def make_events(n: int, status: str, thread_id: str):
    from meshward.contracts import AgentDecision, InteractionCompleted

    rng = random.Random(5)
    questions = make_questions(n)
    events = []
    for i, question in enumerate(questions):
        refused = status == "refused"
        events.append(InteractionCompleted(
            request_id=f"{thread_id}-r{i}",
            thread_id=thread_id,
            question=question,
            answer="I can't help with that request." if refused else make_answer(rng, 3),
            status=status,
            route=["security", "intent", "supervisor", "tools", "supervisor"][: 2 if refused else 5],
            tools_used=[] if refused else ["calculator"],
            duration_ms=rng.uniform(20, 900),
            intent_rejected=refused,
            intent="out_of_scope" if refused else "calculation",
            decisions=[AgentDecision(agent="security", decision="ALLOW", reasoning="no rule matched"),
                       AgentDecision(agent="intent", decision="out_of_scope" if refused else "in_scope", reasoning="classifier")],
        ))
    return events


async def consumer_phase(n: int, status: str, max_seconds: float) -> dict:
    from meshward.bus import Bus, BusSettings
    from meshward.contracts import StatsReply, StatsRequest, subjects
    from meshward.devstack.nats_server import EmbeddedNats
    from meshward.memory.handlers import create_service
    from meshward.memory.settings import MemorySettings

    with tempfile.TemporaryDirectory(prefix="meshward-bench-mem-") as tmp, EmbeddedNats(Path(tmp) / "nats") as server:
        bus = await Bus.connect(BusSettings(nats_url=server.url))
        await bus.ensure_event_stream()
        events = make_events(n, status, f"bench-{uuid.uuid4().hex[:12]}")
        t = time.perf_counter()
        for i in range(0, n, 100):
            await asyncio.gather(*(bus.publish_event(subjects.EVENT_INTERACTION, e) for e in events[i:i + 100]))
        publish_s = time.perf_counter() - t

        os.environ["MESHWARD_NATS_URL"] = server.url
        # MemorySettings reads database_url / chroma_path only under their aliases (MESHWARD_DATABASE_URL /
        # MESHWARD_CHROMA_PATH): passed by field name they are silently ignored and the service would open
        # var/memory.db and var/chroma. Pass the aliases, and check.
        settings = MemorySettings(MESHWARD_DATABASE_URL=f"sqlite+aiosqlite:///{tmp}/m.db", MESHWARD_CHROMA_PATH=f"{tmp}/chroma",
                                  consumer_name=f"bench-{uuid.uuid4().hex[:12]}")
        assert settings.database_url.endswith(f"{tmp}/m.db") and settings.chroma_path == f"{tmp}/chroma", settings
        svc = create_service(settings)
        t = time.perf_counter()
        await svc.start()
        startup_s = time.perf_counter() - t
        try:
            async def stored() -> int:
                return (await bus.request(subjects.MEMORY_STATS, StatsRequest(), StatsReply, timeout=30)).interactions

            t0, at_start = time.perf_counter(), await stored()
            count = at_start
            while count < n and time.perf_counter() - t0 < max_seconds:
                await asyncio.sleep(0.05)
                count = await stored()
            elapsed = time.perf_counter() - t0
        finally:
            await svc.stop()
            await bus.close()
    return {"status": status, "n": n, "stored": count, "done": count >= n, "publish_s": publish_s, "startup_s": startup_s,
            "elapsed_s": elapsed, "rate": (count - at_start) / elapsed if elapsed > 0 else float("nan"), "at_start": at_start}


# ---------------------------------------------------------------------------------------------- (b) semantic
async def semantic_phase(items: int, queries: int, batch: int) -> dict:
    from _common import summary_ms
    from meshward.embedding import get_encoder
    from meshward.memory.semantic import SemanticMemory

    cached = get_encoder.cache_info().currsize > 0  # loaded already by (a)
    t = time.perf_counter()
    encoder = get_encoder()
    load_s = None if cached else time.perf_counter() - t
    questions = make_questions(items)
    rng = random.Random(3)
    with tempfile.TemporaryDirectory(prefix="meshward-bench-chroma-") as tmp:
        sm = await asyncio.to_thread(SemanticMemory.open, path=tmp)
        try:
            t = time.perf_counter()
            for i in range(0, items, batch):
                rows = [(f"q{j}", questions[j], make_answer(rng, 2), {"thread_id": f"t{j % 50}", "intent": "bench"})
                        for j in range(i, min(items, i + batch))]
                await sm.add_interactions(rows)
            insert_s = time.perf_counter() - t
            stored = await sm.count()
            qs = [_QUERIES[i % len(_QUERIES)] + ("" if i < len(_QUERIES) else f" {_QUALIFIERS[i % len(_QUALIFIERS)]}")
                  for i in range(queries)]
            for q in qs[:5]:  # warm-up
                await sm.search(q, k=5)
            lat, enc = [], []
            for q in qs:
                t = time.perf_counter()
                hits = await sm.search(q, k=5)
                lat.append(time.perf_counter() - t)
                assert len(hits) == 5
            for q in qs:
                t = time.perf_counter()
                await asyncio.to_thread(encoder.encode, [q])  # in a worker thread, as search() does
                enc.append(time.perf_counter() - t)
            sample = (qs[0], (await sm.search(qs[0], k=1))[0])
        finally:
            await asyncio.to_thread(sm.close)
    return {"items": items, "stored": stored, "load_s": load_s, "insert_s": insert_s, "rate": items / insert_s,
            "search": summary_ms(lat), "encode": summary_ms(enc), "n": len(lat), "sample": sample}


# ---------------------------------------------------------------------------------------------- (c) context
async def _longest_gap(done: asyncio.Event) -> float:
    """Tick every 1 ms until `done`; the longest gap between ticks (how long the loop was blocked)."""
    longest, last = 0.0, time.perf_counter()
    while not done.is_set():
        await asyncio.sleep(0.001)
        now = time.perf_counter()
        longest, last = max(longest, now - last), now
    return longest


async def context_phase(seconds: float, min_reps: int) -> list[dict]:
    from _common import summary_ms
    from meshward.memory.context import ContextBudget, ContextCompressor

    compressor = ContextCompressor(ContextBudget())
    cases = [("10 turns", make_turns(10, 16)), ("100 turns", make_turns(100, 16)), ("500 turns", make_turns(500, 16)),
             ("10 long turns", make_turns(10, 180))]
    out = []
    for label, turns in cases:
        before = compressor.count(turns)
        packed = await compressor.compress(turns)  # warm-up (and the figures)
        lat = []
        stall = 0.0  # the longest the event loop went without running a 1 ms heartbeat during compress()
        end = time.perf_counter() + seconds
        while len(lat) < min_reps or time.perf_counter() < end:
            done = asyncio.Event()
            beat = asyncio.create_task(_longest_gap(done))
            await asyncio.sleep(0)
            t = time.perf_counter()
            await compressor.compress(turns)
            lat.append(time.perf_counter() - t)
            done.set()
            stall = max(stall, await beat)
        t = time.perf_counter()
        compressor.count(turns)
        count_ms = (time.perf_counter() - t) * 1000
        out.append({"label": label, "turns": len(turns), "before": before, "after": packed.tokens, "compressed": packed.compressed,
                    "folded": packed.folded, "kept": len(packed.turns), "summary_chars": len(packed.summary or ""),
                    "ms": summary_ms(lat), "stall_ms": stall * 1000, "n": len(lat), "count_ms": count_ms, "budget": compressor.budget})
    return out


# ---------------------------------------------------------------------------------------------- (d) store
async def store_phase(questions: int) -> dict[str, float]:
    from meshward.contracts import AgentDecision, InteractionCompleted  # noqa: PLC0415
    from meshward.memory.store import MemoryStore  # noqa: PLC0415

    store = await MemoryStore.open(f"sqlite+aiosqlite:///{tempfile.mkdtemp(prefix='meshward-store-')}/memory.db")
    rnd = random.Random(7)

    async def group_commit() -> int:
        events: list = []
        n = rnd.randint(1, 4)  # questions whose events arrive while one transaction runs, as under load
        for _ in range(n):
            # one event per question: three agents' decisions and the supervisor's six routing decisions
            decisions = [AgentDecision(agent=a, decision="ALLOW", reasoning="ok") for a in ("security", "intent", "assess")]
            decisions += [AgentDecision(agent="supervisor", decision="intent", reasoning="routing reason " * 3) for _ in range(6)]
            events.append(InteractionCompleted(question="Calculate 15 * 23 + 7", answer="15 * 23 + 7 = 352",
                                               status="answered", route=["security", "intent", "tools"], tools_used=["calculator"],
                                               duration_ms=20.0, request_id=uuid.uuid4().hex, decisions=decisions))
        await store.record_events(events)
        return n

    try:
        for _ in range(30):  # warm-up
            await group_commit()
        cpu, wall, done = time.process_time(), time.perf_counter(), 0
        while done < questions:
            done += await group_commit()
        return {"questions": done, "cpu_ms": (time.process_time() - cpu) / done * 1000,
                "wall_ms": (time.perf_counter() - wall) / done * 1000}
    finally:
        await store.close()


# ---------------------------------------------------------------------------------------------- main
def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true", help="300 events, 2,000 items, 100 queries, 1 s per compression case")
    p.add_argument("--events", type=int, default=None, help="backlog size for (a) (default 2000)")
    p.add_argument("--max-seconds", type=float, default=None, help="cap on each catch-up phase of (a) (default 45, quick 20)")
    p.add_argument("--items", type=int, default=None, help="stored items for (b) (default 10000)")
    p.add_argument("--queries", type=int, default=None, help="searches for (b) (default 200)")
    p.add_argument("--batch", type=int, default=500, help="insert batch size for (b)")
    p.add_argument("--seconds", type=float, default=None, help="per compression case in (c) (default 3, quick 1)")
    p.add_argument("--blas-threads", type=int, default=None, help="set OPENBLAS_NUM_THREADS/OMP_NUM_THREADS (before numpy loads)")
    p.add_argument("--only", choices=["consumer", "semantic", "context", "store"], action="append", help="run only these parts")
    args = p.parse_args()
    q = args.quick
    events = args.events or (300 if q else 2000)
    max_seconds = args.max_seconds or (20.0 if q else 45.0)
    items = args.items or (2000 if q else 10_000)
    queries = args.queries or (100 if q else 200)
    seconds = args.seconds or (1.0 if q else 3.0)
    parts = set(args.only or ["consumer", "semantic", "context", "store"])
    if args.blas_threads:
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = str(args.blas_threads)
    os.environ.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    os.environ.setdefault("MESHWARD_LOG_LEVEL", "WARNING")

    from _common import machine  # noqa: PLC0415 - after the BLAS settings, like every other import

    consumer = [asyncio.run(consumer_phase(events, status, max_seconds)) for status in ("refused", "answered")] if "consumer" in parts else []
    semantic = asyncio.run(semantic_phase(items, queries, args.batch)) if "semantic" in parts else None
    context = asyncio.run(context_phase(seconds, 3)) if "context" in parts else []
    store = asyncio.run(store_phase(300 if q else 1000)) if "store" in parts else None

    load = os.getloadavg()
    print(f"machine: {machine()}")
    print(f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; OPENBLAS_NUM_THREADS="
          f"{os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}")
    if consumer:
        print()
        print(f"(a) memory consumer catching up on a backlog of {events} InteractionCompleted events "
              f"(SQLite WAL + embedded Chroma, service in-process, cap {max_seconds:g}s)")
        print(f"{'':30} {'stored':>11} {'seconds':>8} {'events/s':>9} {'startup s':>10} {'publish s':>10}")
        for r in consumer:
            label = f"status={r['status']}" + (" (SQL only)" if r["status"] == "refused" else " (SQL + Chroma)")
            print(f"{label:30} {r['stored']:>5}/{r['n']:<5} {r['elapsed_s']:8.2f} {r['rate']:9.1f} {r['startup_s']:10.2f} {r['publish_s']:10.2f}"
                  + ("" if r["done"] else "  (cap reached)"))
        refused, answered = consumer
        print(f"ratio answered/refused events/s: {answered['rate'] / refused['rate']:.3f}x "
              f"(per event: SQL {1000 / refused['rate']:.1f} ms, SQL + embedding {1000 / answered['rate']:.1f} ms)")
    if semantic:
        s = semantic
        print()
        print(f"(b) semantic memory: {s['stored']} interactions in a fresh embedded Chroma (MiniLM-L6, 384-d, cosine), "
              f"batches of {args.batch}; encoder " + ("loaded by (a)" if s["load_s"] is None else f"load {s['load_s']:.2f}s"))
        print(f"insert: {s['insert_s']:.1f}s, {s['rate']:.1f} items/s (encoding included)")
        print(f"{'':30} {'p50 ms':>9} {'p99 ms':>9} {'mean ms':>9} {'n':>5}")
        print(f"{'search k=5':30} {s['search']['p50']:9.2f} {s['search']['p99']:9.2f} {s['search']['mean']:9.2f} {s['n']:5d}")
        print(f"{'  of which: encode the query':30} {s['encode']['p50']:9.2f} {s['encode']['p99']:9.2f} {s['encode']['mean']:9.2f} {s['n']:5d}")
        print(f"ratio search/encode p50: {s['search']['p50'] / s['encode']['p50']:.2f}x; "
              f"sample: {s['sample'][0]!r} -> {s['sample'][1].text!r} ({s['sample'][1].similarity:.2f})")
    if context:
        b = context[0]["budget"]
        print()
        print(f"(c) ContextCompressor.compress() (count ms: counting the turns alone; loop stall: longest event-loop block, ms), threshold {b.summarize_threshold} / max {b.max_tokens} tokens, "
              f"keep last {b.keep_last}, MiniLM tokenizer, extractive summary")
        print(f"{'':16} {'tokens before':>13} {'after':>7} {'folded':>7} {'kept':>5} {'p50 ms':>9} {'p99 ms':>9} {'count ms':>9} {'loop stall':>10} {'n':>4}")
        for r in context:
            print(f"{r['label']:16} {r['before']:13d} {r['after']:7d} {r['folded']:7d} {r['kept']:5d} {r['ms']['p50']:9.2f} "
                  f"{r['ms']['p99']:9.2f} {r['count_ms']:9.2f} {r['stall_ms']:10.2f} {r['n']:4d}" + ("" if r["compressed"] else "  (under threshold: as is)"))
        by = {r["label"]: r for r in context}
        print(f"ratio 500/100 turns p50: {by['500 turns']['ms']['p50'] / by['100 turns']['ms']['p50']:.2f}x; "
              f"per 1k input tokens at 500 turns: {by['500 turns']['ms']['p50'] / (by['500 turns']['before'] / 1000):.2f} ms")
    if store:
        print()
        print(f"(d) SQL store (SQLite file), {store['questions']} questions in group commits of 1-4, six routing decisions "
              f"and one interaction each: {store['cpu_ms']:.2f} ms CPU and {store['wall_ms']:.2f} ms wall per question")


if __name__ == "__main__":
    main()
