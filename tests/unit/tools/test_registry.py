"""The catalog's read_only: what the supervisor may send twice."""
from __future__ import annotations

from meshward.tools.builtin import build_registry


def test_only_tools_that_change_nothing_are_read_only():
    catalog = {spec.name: spec for spec in build_registry().catalog()}
    read_only = {name for name, spec in catalog.items() if spec.read_only}
    assert {"calculator", "plot", "pdf_extract", "weather_forecast", "ip_geolocate", "cli_execute", "cluster_health"} <= read_only
    # whatever needs a human's approval changes something, so it is never sent twice
    assert not {name for name, spec in catalog.items() if spec.requires_approval} & read_only
    assert {"cluster_register", "cluster_remove", "remote_cli"}.isdisjoint(read_only)
