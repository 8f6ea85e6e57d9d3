"""Models are artifacts: services find a build by path, version or recency and check only its preprocessing
version; whether a build is stale for the current data, training code and hyper-parameters is this file's
question (never start-up's); the run time never imports the training code; pytest never trains."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from meshward.classifier import (
    ModelNotBuiltError,
    Preprocessing,
    PreprocessingMismatchError,
    read_card,
    resolve_model,
)
from meshward.classifier.store import REQUIRED_FILES

ROOT = Path(__file__).resolve().parents[3]
PRE = Preprocessing("views", 2)


def _fake_build(root: Path, name: str, key: str, preprocessing: dict | None, mtime: int, **card) -> Path:
    """A folder with the files a build has (resolution looks at names and the card, not at weights)."""
    directory = root / f"{name}-{key}"
    directory.mkdir(parents=True)
    for f in REQUIRED_FILES:
        (directory / f).write_text("x")
    body = {"key": key, **card}
    if preprocessing is not None:
        body["preprocessing"] = preprocessing
    (directory / "card.json").write_text(json.dumps(body))
    os.utime(directory, (mtime, mtime))
    return directory


# ------------------------------------------------------------------ stale builds: a test, not start-up


@pytest.mark.parametrize("name, runtime, training", [
    ("security", "meshward.security.classifier", "meshward.security_training"),
    ("security-chargram", "meshward.security.chargram", "meshward.security_training.chargram"),
])
def test_the_security_model_services_load_is_built_from_the_current_data_and_training_code(name, runtime, training):
    import importlib

    directory = importlib.import_module(runtime).model_dir()
    expected = importlib.import_module(training).key()
    assert read_card(directory)["key"] == expected, (
        f"the {name} model the service loads ({directory}) is stale: the data, training code or hyper-parameters "
        f"changed since it was built (current key {expected}): run `make models`")


def test_the_intent_model_services_load_is_built_from_the_current_scope_data_and_training_code():
    from meshward.intent.classifier import model_dir
    from meshward.intent.scope import load_scope
    from meshward.intent_training import key

    scope = load_scope()
    directory = model_dir(scope)
    expected = key(scope)
    assert read_card(directory)["key"] == expected, (
        f"the intent model the service loads ({directory}) is stale: the scope file, data, training code or "
        f"hyper-parameters changed since it was built (current key {expected}): run `make models`")


def test_run_time_source_is_not_part_of_a_model_key():
    """Editing the security service (a comment in classifier.py) must not make its model unusable: the key
    holds the preprocessing version instead of run-time files."""
    from meshward.security_training import build_spec

    parts = [str(p) for p in build_spec().key_parts()]
    assert not [p for p in parts if "/meshward/security/" in p], parts
    assert all("security_training" in p for p in parts)


def test_the_preprocessing_version_is_in_the_key():
    from dataclasses import replace

    from meshward.security_training import build_spec
    from meshward.training import model_key

    spec = build_spec()
    bumped = replace(spec, preprocessing=Preprocessing(spec.preprocessing.name, spec.preprocessing.version + 1))
    assert model_key(bumped) != model_key(spec)


def test_a_changed_scope_file_is_a_new_intent_key_and_needs_its_own_build(tmp_path, monkeypatch):
    from meshward.intent.classifier import model_dir, scope_fingerprint
    from meshward.intent.scope import load_scope
    from meshward.intent_training import key

    scope = load_scope()
    data = scope.model_dump()
    first = next(iter(data["intents"]))
    data["intents"][first]["examples"] = [*data["intents"][first]["examples"], "one more way to ask for it"]
    changed = type(scope).model_validate(data)
    assert key(changed) != key(scope)
    assert scope_fingerprint(changed) != scope_fingerprint(scope)
    pre = {"name": "intent-text", "version": 1}
    _fake_build(tmp_path, "intent", "aaaa", pre, 100, scope_fingerprint=scope_fingerprint(scope))
    monkeypatch.setenv("MESHWARD_MODELS_DIR", str(tmp_path))
    monkeypatch.delenv("MESHWARD_INTENT_MODEL_DIR", raising=False)
    monkeypatch.delenv("MESHWARD_INTENT_MODEL_VERSION", raising=False)
    assert model_dir(scope) == tmp_path / "intent-aaaa"
    with pytest.raises(ModelNotBuiltError, match="make models") as err:
        model_dir(changed)
    assert "fingerprint" in str(err.value)


# ------------------------------------------------------------------ resolution and the preprocessing check


def test_the_newest_build_with_the_services_preprocessing_is_loaded(tmp_path):
    _fake_build(tmp_path, "sec", "old1", PRE.as_card(), 100)
    newest = _fake_build(tmp_path, "sec", "new2", PRE.as_card(), 300)
    _fake_build(tmp_path, "sec", "mid3", PRE.as_card(), 200)
    _fake_build(tmp_path, "secondary", "zzz9", PRE.as_card(), 999)  # another model's name prefix
    assert resolve_model("sec", PRE, root=tmp_path) == newest


def test_a_newer_build_for_other_preprocessing_is_skipped(tmp_path):
    fits = _fake_build(tmp_path, "sec", "fits", PRE.as_card(), 100)
    _fake_build(tmp_path, "sec", "v3", {"name": "views", "version": 3}, 200)
    assert resolve_model("sec", PRE, root=tmp_path) == fits


def test_only_other_preprocessing_is_a_clear_start_up_error(tmp_path):
    _fake_build(tmp_path, "sec", "v1", {"name": "views", "version": 1}, 100)
    _fake_build(tmp_path, "sec", "legacy", None, 50)
    with pytest.raises(PreprocessingMismatchError) as err:
        resolve_model("sec", PRE, root=tmp_path)
    message = str(err.value)
    assert "views v1" in message and "views v2" in message and "make models" in message


def test_a_model_given_by_path_is_checked_too(tmp_path):
    directory = _fake_build(tmp_path / "elsewhere", "sec", "k", {"name": "other", "version": 2}, 100)
    with pytest.raises(PreprocessingMismatchError, match="make models"):
        resolve_model("sec", PRE, path=directory, root=tmp_path)
    good = _fake_build(tmp_path / "elsewhere", "sec", "k2", PRE.as_card(), 100)
    assert resolve_model("sec", PRE, path=good, root=tmp_path) == good
    with pytest.raises(ModelNotBuiltError, match="not a built sec model"):
        resolve_model("sec", PRE, path=tmp_path / "nothing", root=tmp_path)


def test_a_model_is_loaded_by_version(tmp_path):
    older = _fake_build(tmp_path, "sec", "abc123", PRE.as_card(), 100)
    _fake_build(tmp_path, "sec", "def456", PRE.as_card(), 200)
    assert resolve_model("sec", PRE, version="abc", root=tmp_path) == older
    with pytest.raises(ModelNotBuiltError, match="no built sec model of version 999"):
        resolve_model("sec", PRE, version="999", root=tmp_path)


def test_no_build_at_all_names_the_fix(tmp_path):
    with pytest.raises(ModelNotBuiltError, match="make models"):
        resolve_model("sec", PRE, root=tmp_path)


# ------------------------------------------------------------------ the run time never imports training


def test_the_services_import_neither_torch_nor_the_training_code():
    code = ("import sys\n"
            "import meshward.security.handlers, meshward.security.classifier\n"
            "import meshward.intent.handlers, meshward.intent.classifier\n"
            "bad = sorted(m for m in sys.modules if m == 'torch' or m == 'transformers' or m == 'meshward.training'"
            " or m.startswith(('torch.', 'meshward.training.')) or m.endswith('_training'))\n"
            "print(bad)\n"
            "sys.exit(1 if bad else 0)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_runtime_distributions_do_not_depend_on_training():
    import tomllib

    for dist in ("libs/classifier", "services/security", "services/intent"):
        project = tomllib.loads((ROOT / dist / "pyproject.toml").read_text())["project"]
        requires = [*project.get("dependencies", []),
                    *[r for extra in project.get("optional-dependencies", {}).values() for r in extra]]
        assert not [r for r in requires if r.startswith(("torch", "transformers", "meshward-training"))], (dist, requires)


# ------------------------------------------------------------------ pytest never trains


def test_a_pytest_run_without_models_trains_nothing_and_says_make_models(tmp_path):
    """A session whose models root is empty: the header says `make models`, a test that needs the security
    model fails with that fix, and the root stays without a build (nothing was trained)."""
    env = {**os.environ, "MESHWARD_MODELS_DIR": str(tmp_path)}
    for var in ("MESHWARD_SECURITY_MODEL_DIR", "MESHWARD_SECURITY_MODEL_VERSION",
                "MESHWARD_INTENT_MODEL_DIR", "MESHWARD_INTENT_MODEL_VERSION"):
        env.pop(var, None)
    test = "tests/unit/classifiers/test_model_artifacts.py::test_the_security_model_services_load_is_built_from_the_current_data_and_training_code"
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", test],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "security model: NONE" in out and "make models" in out
    assert not [p for p in tmp_path.iterdir() if p.is_dir()], list(tmp_path.iterdir())
