"""LLM benchmark: the embedded model (SmolLM2-135M-Instruct Q4_1 on xllamacpp) and the provider chain's
fallback overhead.

Embedded, in this process through the llm service's backend (no NATS hop: bench/hop.py measures that):
load time; then the same open question answered `--runs` times one at a time, and `--runs` rounds of 4
at once (a backend with 4 slots): first-token latency (request to the first streamed piece) and decode
tokens/s (completion tokens after the first, over the time after the first), per request and in
aggregate (all completion tokens of a round over its wall time).

Chain, against loopback OpenAI-compatible servers (tests/fake_openai.py): the same short completion
directly, and through one provider that fails first (HTTP 503; a refused connection; an open circuit).
Overhead = p50 via the failure - p50 direct, measured in the same run.

    .venv/bin/python bench/llm.py [--runs 5] [--tokens 64] [--chain-calls 200] [--transformers]

--transformers also loads the same GGUF into torch through transformers (the alternative the README
compares against; needs the `gguf` and `accelerate` packages, not meshward dependencies) and measures it
the same way.
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from _common import machine, summary_ms  # noqa: E402
from meshward.contracts import ChatMessage, ChatRequest, ChatRole  # noqa: E402
from meshward.llm.settings import LLMSettings  # noqa: E402

QUESTION = "Why would load average be high while CPU usage is low?"


_asked = iter(range(1 << 30))


def request(tokens: int) -> ChatRequest:
    # A different first word each time: llama.cpp reuses the cached prompt prefix, and a repeated question
    # would hide the prompt's evaluation from the first-token latency.
    text = f"Question {next(_asked)}: {QUESTION}"
    return ChatRequest(messages=[ChatMessage(role=ChatRole.USER, content=text)], max_tokens=tokens, temperature=0.0)


async def one(backend, tokens: int) -> tuple[float, float, int, float]:
    """(first-token s, total s, completion tokens, decode tokens/s) of one streamed answer."""
    first: list[float] = []
    started = time.perf_counter()

    async def sink(delta: str, provider: str, restart: bool) -> None:
        if not first:
            first.append(time.perf_counter() - started)

    r = await backend.chat(request(tokens), sink)
    total = time.perf_counter() - started
    n = r.usage.completion_tokens
    decode = (n - 1) / (total - first[0]) if first and n > 1 and total > first[0] else float("nan")
    return (first[0] if first else float("nan")), total, n, decode


async def embedded(runs: int, tokens: int, concurrency: int) -> dict:
    from meshward.llm.embedded import EmbeddedBackend

    backend = EmbeddedBackend(LLMSettings(max_concurrency=concurrency))
    started = time.perf_counter()
    await backend.start()
    load = time.perf_counter() - started
    await one(backend, 8)  # warm-up
    firsts, decodes, aggregate = [], [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        results = await asyncio.gather(*(one(backend, tokens) for _ in range(concurrency)))
        wall = time.perf_counter() - t0
        firsts += [r[0] for r in results]
        decodes += [r[3] for r in results]
        aggregate.append(sum(r[2] for r in results) / wall)
    await backend.close()
    decodes = [d for d in decodes if d == d] or [float("nan")]  # answers of one token have no decode rate
    return {"load_s": load, "first_ms": summary_ms(firsts), "decode_tps": statistics.median(decodes),
            "aggregate_tps": statistics.median(aggregate)}


def transformers_figures(runs: int, tokens: int) -> dict:
    """The same GGUF de-quantized into torch by transformers (CPU): the alternative runtime."""
    import threading

    import torch
    from meshward.llm.embedded import packaged_model_path
    from transformers import AutoModelForCausalLM, AutoTokenizer, TextIteratorStreamer

    path = packaged_model_path()
    started = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    load = time.perf_counter() - started
    ids = tok.apply_chat_template([{"role": "user", "content": QUESTION}], add_generation_prompt=True,
                                  return_tensors="pt", return_dict=True)
    firsts, decodes = [], []
    for i in range(runs + 1):
        streamer = TextIteratorStreamer(tok, skip_prompt=True)
        t0 = time.perf_counter()
        out: list = []
        worker = threading.Thread(target=lambda out=out, streamer=streamer: out.append(model.generate(
            **ids, max_new_tokens=tokens, do_sample=False, streamer=streamer, min_new_tokens=tokens)))
        worker.start()
        first = None
        for piece in streamer:
            if first is None and piece:
                first = time.perf_counter() - t0
        worker.join()
        total = time.perf_counter() - t0
        n = out[0].shape[1] - ids["input_ids"].shape[1]
        if i:  # the first is the warm-up
            firsts.append(first)
            decodes.append((n - 1) / (total - first))
    return {"load_s": load, "first_ms": summary_ms(firsts), "decode_tps": statistics.median(decodes)}


async def chain_overhead(calls: int) -> dict[str, dict[str, float]]:
    from meshward.llm.chain import ProviderChain

    from tests.fake_openai import FakeOpenAI, Reply, dead_url

    results = {}
    with FakeOpenAI(default=Reply(text="short answer")) as good, \
            FakeOpenAI(default=Reply(kind="status", status=503)) as failing:
        cases = {
            "direct": ([good.base_url], {}),
            "via 503": ([failing.base_url, good.base_url], {"breaker_threshold": 100}),
            "via refused connection": ([dead_url(), good.base_url], {"breaker_threshold": 100}),
            "via open circuit": ([failing.base_url, good.base_url], {"breaker_threshold": 1, "breaker_ttl_s": 3600}),
        }
        for name, (urls, extra) in cases.items():
            providers = [{"name": f"p{i}", "base_url": u, "model": "m"} for i, u in enumerate(urls)]
            chain = ProviderChain(LLMSettings(providers=providers, **extra))
            await chain.start()
            for _ in range(5):  # warm-up (and, for the open circuit, the failure that opens it)
                await chain.chat(request(16), None)
            samples = []
            for _ in range(calls):
                t0 = time.perf_counter()
                r = await chain.chat(request(16), None)
                samples.append(time.perf_counter() - t0)
                assert r.provider == f"p{len(urls) - 1}"
            await chain.close()
            results[name] = summary_ms(samples)
    return results


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--chain-calls", type=int, default=200)
    ap.add_argument("--transformers", action="store_true")
    ap.add_argument("--skip-chain", action="store_true")
    args = ap.parse_args()
    print(f"machine: {machine()}")
    print(f"\nembedded SmolLM2-135M-Instruct Q4_1 (xllamacpp), {args.tokens} tokens per answer, {args.runs} rounds")
    print(f"{'concurrent':>10} {'load s':>7} {'first-token p50 ms':>19} {'p99 ms':>8} {'decode tok/s':>13} {'aggregate tok/s':>16}")
    for concurrency in (1, 4):
        f = await embedded(args.runs, args.tokens, concurrency)
        print(f"{concurrency:>10} {f['load_s']:>7.2f} {f['first_ms']['p50']:>19.0f} {f['first_ms']['p99']:>8.0f} "
              f"{f['decode_tps']:>13.1f} {f['aggregate_tps']:>16.1f}")
    if args.transformers:
        t = await asyncio.to_thread(transformers_figures, args.runs, args.tokens)
        print(f"\ntransformers + torch (same GGUF, de-quantized to fp32), 1 at a time: load {t['load_s']:.1f} s, "
              f"first token p50 {t['first_ms']['p50']:.0f} ms, decode {t['decode_tps']:.1f} tok/s")
    if args.skip_chain:
        return
    print(f"\nprovider chain, loopback OpenAI-compatible servers, {args.chain_calls} sequential calls each")
    results = await chain_overhead(args.chain_calls)
    base = results["direct"]["p50"]
    print(f"{'case':>24} {'p50 ms':>8} {'p99 ms':>8} {'overhead p50 ms':>16}")
    for name, s in results.items():
        print(f"{name:>24} {s['p50']:>8.2f} {s['p99']:>8.2f} {s['p50'] - base:>16.2f}")


if __name__ == "__main__":
    asyncio.run(main())
