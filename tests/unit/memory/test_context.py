"""Tier 1 context compression, counted with the real MiniLM word-piece tokenizer (no estimates)."""
from __future__ import annotations

from datetime import UTC, datetime

import pytest
from meshward.contracts import Turn
from meshward.embedding import get_encoder
from meshward.memory.context import (
    SUMMARY_HEADER,
    SUMMARY_QUESTION,
    ContextBudget,
    ContextCompressor,
    ExtractiveSummarizer,
    dedupe_turns,
    render_turn,
    truncate_to_tokens,
)

CITIES = ["Frankfurt", "Dublin", "Paris", "Madrid", "Oslo", "Tokyo", "Vienna", "Lisbon", "Warsaw", "Zurich",
          "Prague", "Helsinki", "Athens", "Rome", "Milan", "Sofia", "Riga", "Tallinn", "Vilnius", "Bern"]

SMALL = ContextBudget(max_tokens=300, summarize_threshold=200, keep_last=5)


@pytest.fixture(scope="module")
def count_tokens():
    return get_encoder().count_tokens


def weather_turn(i: int, city: str) -> dict:
    return {
        "question": f"What is the weather at the {city} data center today?",
        "answer": f"The {city} data center reports {10 + i} degrees Celsius and {40 + i}% humidity. "
                  f"Cooling units are running normally. Wind from the west at {5 + i} km/h.",
    }


def conversation(n: int = 20) -> list[dict]:
    return [weather_turn(i, CITIES[i % len(CITIES)]) for i in range(n)]


def exact_tokens(count_tokens, turns, summary=None) -> int:
    return (count_tokens(summary) if summary else 0) + sum(count_tokens(render_turn(t)) for t in turns)


# ---------------------------------------------------------------------------------------------- budget
def test_budget_defaults_follow_the_architecture():
    budget = ContextBudget()
    assert (budget.max_tokens, budget.summarize_threshold, budget.keep_last) == (28_000, 20_000, 5)
    assert budget.summary_tokens == 5_000


@pytest.mark.parametrize("kwargs", [
    {"max_tokens": 0},
    {"max_tokens": 100, "summarize_threshold": 101},
    {"summarize_threshold": 0},
    {"keep_last": -1},
    {"summary_ratio": 0.0},
    {"summary_ratio": 1.5},
])
def test_budget_rejects_inconsistent_limits(kwargs):
    with pytest.raises(ValueError):
        ContextBudget(**kwargs)


# ---------------------------------------------------------------------------------------------- compression
async def test_under_threshold_is_returned_unchanged(count_tokens):
    turns = conversation(2)
    result = await ContextCompressor(SMALL, count_tokens).compress(turns, None)
    assert not result.compressed
    assert result.summary is None
    assert result.turns == turns
    assert result.tokens == exact_tokens(count_tokens, turns) <= SMALL.summarize_threshold


async def test_tokens_are_counted_with_the_real_tokenizer(count_tokens):
    turns = conversation(3)
    result = await ContextCompressor(SMALL, count_tokens).compress(turns, "Earlier: Zürich’s PUE was 1.31.")
    expected = count_tokens("Earlier: Zürich’s PUE was 1.31.") + sum(count_tokens(render_turn(t)) for t in turns)
    assert result.tokens == expected
    # a word-piece count, not a characters/4 estimate
    assert result.tokens != sum(len(render_turn(t)) // 4 for t in turns)


async def test_over_threshold_folds_all_but_the_last_keep_last(count_tokens):
    turns = conversation(20)
    assert exact_tokens(count_tokens, turns) > SMALL.summarize_threshold
    result = await ContextCompressor(SMALL, count_tokens).compress(turns, None)
    assert result.compressed
    assert result.folded == 15
    assert result.turns == turns[-5:]
    assert all(a is b for a, b in zip(result.turns, turns[-5:], strict=True))  # kept turns are not copied
    assert result.summary is not None and result.summary.startswith(SUMMARY_HEADER)
    assert count_tokens(result.summary) <= SMALL.summary_tokens
    assert result.tokens == exact_tokens(count_tokens, result.turns, result.summary)
    assert result.tokens <= SMALL.max_tokens


@pytest.mark.parametrize("keep_last", [0, 1, 3, 8])
async def test_keep_last_is_honoured(count_tokens, keep_last):
    budget = ContextBudget(max_tokens=600, summarize_threshold=200, keep_last=keep_last)
    turns = conversation(12)
    result = await ContextCompressor(budget, count_tokens).compress(turns, None)
    assert result.turns == (turns[-keep_last:] if keep_last else [])
    assert result.folded == 12 - keep_last
    assert result.tokens <= budget.max_tokens


async def test_summary_stays_bounded_as_it_is_refolded(count_tokens):
    compressor = ContextCompressor(SMALL, count_tokens)
    summary, turns = None, []
    for i in range(60):  # a long conversation, compressed after every turn
        turns.append(weather_turn(i, CITIES[i % len(CITIES)]))
        result = await compressor.compress(turns, summary)
        summary, turns = result.summary, list(result.turns)
        assert result.tokens <= SMALL.max_tokens
        if summary:
            assert count_tokens(summary) <= SMALL.summary_tokens
    assert summary is not None


async def test_a_huge_previous_summary_is_cut_to_the_budget(count_tokens):
    previous = " ".join(f"Fact {i}: the {CITIES[i % 20]} site has {i} racks." for i in range(400))
    assert count_tokens(previous) > 10 * SMALL.summary_tokens
    result = await ContextCompressor(SMALL, count_tokens).compress(conversation(8), previous)
    assert result.compressed
    assert count_tokens(result.summary) <= SMALL.summary_tokens
    assert result.tokens <= SMALL.max_tokens


async def test_compressing_a_compressed_context_is_stable(count_tokens):
    compressor = ContextCompressor(SMALL, count_tokens)
    first = await compressor.compress(conversation(20), None)
    second = await compressor.compress(first.turns, first.summary)
    assert not second.compressed
    assert (second.summary, second.turns, second.tokens) == (first.summary, first.turns, first.tokens)
    third = await compressor.compress(second.turns, second.summary)
    assert (third.summary, third.turns, third.tokens) == (first.summary, first.turns, first.tokens)


async def test_compression_is_deterministic(count_tokens):
    compressor = ContextCompressor(SMALL, count_tokens)
    a = await compressor.compress(conversation(20), None)
    b = await compressor.compress(conversation(20), None)
    assert a == b


async def test_repeated_turns_are_summarised_once(count_tokens):
    repeated = {"question": "Is the Frankfurt generator test still scheduled for Friday?",
                "answer": "Yes, the Frankfurt generator test runs on Friday at 06:00 UTC."}
    turns = [dict(repeated) for _ in range(10)] + conversation(3)
    budget = ContextBudget(max_tokens=600, summarize_threshold=200, keep_last=2, summary_ratio=1.0)
    result = await ContextCompressor(budget, count_tokens).compress(turns, None)
    assert result.folded == 11 and "Frankfurt data center reports 10 degrees" in result.summary
    assert result.summary.count("generator test still scheduled") == 1
    assert result.summary.count("generator test runs on Friday") == 1
    lines = result.summary.splitlines()
    assert len(lines) == len(set(lines))


async def test_a_repeated_turn_is_salient(count_tokens):
    # With a tight budget, what the user kept asking about is what the summary keeps.
    repeated = {"question": "Is the Frankfurt generator test still scheduled for Friday?",
                "answer": "Yes, the Frankfurt generator test runs on Friday at 06:00 UTC."}
    turns = conversation(6) + [dict(repeated) for _ in range(6)] + conversation(6)
    budget = ContextBudget(max_tokens=300, summarize_threshold=200, keep_last=2)
    result = await ContextCompressor(budget, count_tokens).compress(turns, None)
    assert "generator test" in result.summary


def test_dedupe_turns_ignores_case_and_punctuation():
    a = {"question": "What is the weather in Oslo?", "answer": "Cold."}
    b = {"question": "what is the weather in oslo", "answer": "cold"}
    c = {"question": "What is the weather in Oslo?", "answer": "Warm."}
    assert dedupe_turns([a, b, c]) == [a, c]
    assert dedupe_turns([a, c], also_seen=[b]) == [c]


async def test_informative_sentences_win_the_budget(count_tokens):
    # The outage is what this conversation is about; greetings and filler must not crowd it out.
    turns = [
        {"question": "Hi there!", "answer": "Hello! How can I help you today?"},
        {"question": "Why did the Dublin cooling outage happen?",
         "answer": "The Dublin cooling outage started when chiller 3 lost power. The outage lasted 40 minutes."},
        {"question": "Thanks.", "answer": "You are welcome."},
        {"question": "Is chiller 3 in Dublin fixed after the outage?",
         "answer": "Chiller 3 in Dublin was repaired and the cooling outage is resolved."},
        {"question": "Ok.", "answer": "Anything else?"},
    ] * 1
    summary = ExtractiveSummarizer(count_tokens).summarize(turns, None, 40)
    assert count_tokens(summary) <= 40
    assert "outage" in summary.lower()
    assert "hello! how can i help" not in summary.lower()


# ---------------------------------------------------------------------------------------------- hard limit
async def test_recent_turns_over_max_tokens_are_folded_too(count_tokens):
    long_answer = " ".join(f"Rack {i} in hall B reads {20 + i % 7} degrees." for i in range(20))
    turns = [{"question": f"Report for hall B, part {i}?", "answer": long_answer} for i in range(5)]
    budget = ContextBudget(max_tokens=400, summarize_threshold=300, keep_last=5)
    assert exact_tokens(count_tokens, turns) > budget.max_tokens
    result = await ContextCompressor(budget, count_tokens).compress(turns, None)
    assert result.compressed
    assert 1 <= len(result.turns) < 5
    assert result.turns[-1] is turns[-1]
    assert result.tokens <= budget.max_tokens
    # and the result is a fixed point
    again = await ContextCompressor(budget, count_tokens).compress(result.turns, result.summary)
    assert (again.summary, again.turns, again.tokens) == (result.summary, result.turns, result.tokens)


async def test_a_single_turn_over_max_tokens_is_shortened_as_a_copy(count_tokens):
    huge = {"question": "Dump the full sensor log?", "answer": "reading " * 2000, "extra": "kept"}
    budget = ContextBudget(max_tokens=120, summarize_threshold=100, keep_last=5)
    result = await ContextCompressor(budget, count_tokens).compress([huge], "Earlier we discussed Oslo.")
    assert result.tokens <= budget.max_tokens
    [turn] = result.turns
    assert turn is not huge and turn["extra"] == "kept"
    assert turn["question"] == huge["question"]
    assert huge["answer"] == "reading " * 2000  # the input is not mutated


async def test_contract_turns_are_supported(count_tokens):
    now = datetime.now(UTC)
    turns = [Turn(question=t["question"], answer=t["answer"], status="ok", at=now, event_id=f"e{i}")
             for i, t in enumerate(conversation(12))]
    result = await ContextCompressor(SMALL, count_tokens).compress(turns, None)
    assert result.turns == turns[-5:]
    assert result.summary and result.tokens <= SMALL.max_tokens


# ---------------------------------------------------------------------------------------------- LLM path
async def test_llm_summariser_receives_the_previous_summary_and_the_old_turns(count_tokens):
    calls: list[list] = []

    async def summarize(turns):
        calls.append(list(turns))
        return "The user checked the weather at fifteen European data centers."

    turns = conversation(20)
    turns[3] = dict(turns[2])  # a repeat: sent to the model once
    compressor = ContextCompressor(SMALL, count_tokens, summarize=summarize)
    result = await compressor.compress(turns, "They started with Frankfurt.")
    assert result.summary == "The user checked the weather at fifteen European data centers."
    assert result.turns == turns[-5:]
    [batch] = calls
    assert batch[0] == {"question": SUMMARY_QUESTION, "answer": "They started with Frankfurt."}
    assert batch[1:] == [t for i, t in enumerate(turns[:15]) if i != 3]
    # stable afterwards: nothing left to fold, so the model is not called again
    again = await compressor.compress(result.turns, result.summary)
    assert not again.compressed and len(calls) == 1


async def test_llm_summary_is_cut_to_the_budget(count_tokens):
    async def verbose(turns):
        return "Very detailed recollection. " * 500

    result = await ContextCompressor(SMALL, count_tokens, summarize=verbose).compress(conversation(20), None)
    assert count_tokens(result.summary) <= SMALL.summary_tokens
    assert result.tokens <= SMALL.max_tokens


@pytest.mark.parametrize("outcome", ["raise", "empty"])
async def test_llm_failure_falls_back_to_extraction(count_tokens, outcome):
    async def broken(turns):
        if outcome == "raise":
            raise RuntimeError("model unavailable")
        return "   "

    result = await ContextCompressor(SMALL, count_tokens, summarize=broken).compress(conversation(20), None)
    expected = await ContextCompressor(SMALL, count_tokens).compress(conversation(20), None)
    assert result.summary == expected.summary
    assert result.summary.startswith(SUMMARY_HEADER)


# ---------------------------------------------------------------------------------------------- truncation
@pytest.mark.parametrize("limit", [1, 2, 5, 17, 64])
def test_truncate_to_tokens_fits(count_tokens, limit):
    text = "The Frankfurt data-center's PUE was 1.31 during the heatwave; chiller #3 tripped twice. " * 5
    cut = truncate_to_tokens(text, limit, count_tokens)
    assert 0 < count_tokens(cut) <= limit
    assert truncate_to_tokens(cut, limit, count_tokens) == cut  # idempotent
    assert truncate_to_tokens("short", limit, count_tokens) == "short"
