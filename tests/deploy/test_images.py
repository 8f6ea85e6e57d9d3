"""The image build inputs, checked without an engine: every target the scripts build exists in the Dockerfile,
every runtime stage drops root, and the build context holds only the wheelhouse and the staged models."""
from __future__ import annotations

import re

from .conftest import ROOT

DOCKERFILE = (ROOT / "docker" / "Dockerfile").read_text()


def stages() -> dict[str, str]:
    parts = re.split(r"^FROM\s+", DOCKERFILE, flags=re.M)[1:]
    return {re.match(r"\S+\s+AS\s+(\S+)", p).group(1): p for p in parts}


def test_targets_built_by_make_images_exist():
    built = set(re.findall(r"build \"meshward/\S+\" (\S+) ", (ROOT / "docker" / "images.sh").read_text()))
    assert built == {"classifier", "service"}
    assert built <= set(stages())


def test_runtime_stages_are_non_root_with_a_healthcheck_and_no_pip():
    stage = stages()["service"]
    assert "USER 10001:10001" in stage and "HEALTHCHECK" in stage
    assert "pip uninstall --yes pip" in stages()["build"]
    assert "--no-index" in stages()["build"]
    assert "onnxruntime-gpu" in stages()["build"]  # VARIANT=gpu
    assert "torch" not in DOCKERFILE.lower().replace("no torch", "")


def test_base_defaults_to_the_official_image():
    assert "ARG BASE_IMAGE=python:3.11-slim-bookworm" in DOCKERFILE


def test_build_context_is_only_wheels_models_and_the_scope():
    lines = [ln for ln in (ROOT / ".dockerignore").read_text().splitlines() if ln and not ln.startswith("#")]
    assert lines == ["*", "!build/wheelhouse", "!build/models", "!services/intent/src/meshward/intent/scopes"]
