"""Every AgentPorts implementation takes what the graph passes: NatsPorts, and the benches' in-process monolith
(a parameter the graph gained and a port lacked failed every tool call of bench/e2e.py's monolith)."""
from __future__ import annotations

import importlib.util
import inspect
from pathlib import Path

import pytest
from meshward.supervisor.ports import AgentPorts, NatsPorts

ROOT = Path(__file__).resolve().parents[3]


def _monolith_ports() -> type:
    spec = importlib.util.spec_from_file_location("bench_monolith", ROOT / "bench" / "monolith.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.LocalPorts


def _methods() -> list[str]:
    return [n for n, v in vars(AgentPorts).items() if inspect.isfunction(v) and not n.startswith("_")]


@pytest.mark.parametrize(("impl", "complete"), [(NatsPorts, True), (_monolith_ports(), False)], ids=["nats", "monolith"])
def test_an_implementation_has_every_port_with_its_parameters(impl, complete):
    for name in _methods():
        if not complete and not hasattr(impl, name):
            continue  # the monolith serves the fast tier's questions only
        want = list(inspect.signature(getattr(AgentPorts, name)).parameters)
        got = list(inspect.signature(getattr(impl, name)).parameters)
        assert got == want, f"{impl.__name__}.{name}{got} differs from AgentPorts.{name}{want}"
