"""Every question set under bench/corpora reads as the security benches read it (a text and a known label on each
line), and no text is in a set twice: a set written by a helper session lands whole or not at all."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
CORPORA = sorted((ROOT / "bench" / "corpora").glob("question_*.jsonl"))


@pytest.fixture(scope="module")
def read_corpus():
    """The benches' own reader (bench/ask_eval.py), loaded once."""
    spec = importlib.util.spec_from_file_location("bench_ask_eval", ROOT / "bench" / "ask_eval.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.read_corpus


def test_the_question_sets_are_there():
    assert {p.stem for p in CORPORA} >= {"question_blind4", "question_seeming_blind", "question_european_blind"}


@pytest.mark.parametrize("path", CORPORA, ids=[p.stem for p in CORPORA])
def test_a_question_set_reads_whole_with_no_text_twice(path, read_corpus):
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(read_corpus(path)) == len(lines)
    texts = [json.loads(line)["text"] for line in lines]
    assert len(set(texts)) == len(texts)
