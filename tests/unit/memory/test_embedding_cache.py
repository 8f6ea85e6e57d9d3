"""The memory's embedding function encodes each text once while it is recent, and misses in one batch."""
from __future__ import annotations

import numpy as np
from meshward.memory.semantic import MiniLMEmbeddingFunction


class CountingEncoder:
    model_version = "fake"

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def encode(self, texts):
        self.calls.append(list(texts))
        return np.array([[float(len(t)), 1.0] for t in texts], dtype=np.float32)


def test_repeated_texts_are_encoded_once_and_misses_share_one_call():
    enc = CountingEncoder()
    ef = MiniLMEmbeddingFunction(enc, cache_size=2)
    first = ef(["a", "bb", "a"])
    assert enc.calls == [["a", "bb"]]
    assert [v.tolist() for v in first] == [[1.0, 1.0], [2.0, 1.0], [1.0, 1.0]]
    ef(["bb"])
    assert enc.calls == [["a", "bb"]]
    ef(["ccc"])  # evicts the least recent ("a")
    ef(["a"])
    assert enc.calls == [["a", "bb"], ["ccc"], ["a"]]
