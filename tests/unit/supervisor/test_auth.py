"""API keys, the exposure rule, the token bucket and the key file (logic; the socket tests are in integration)."""
from __future__ import annotations

import stat

import pytest
from meshward.supervisor.auth import ExposureError, KeyFile, Keys, RateLimiter, configure, digest, parse_env_keys


def test_env_keys_accept_plain_keys_and_digests_and_refuse_weak_ones():
    key = "k" * 32
    table = parse_env_keys(f"ci={key}, ops=sha256:{digest('x' * 40)}")
    assert table == {digest(key): "ci", digest("x" * 40): "ops"}
    for bad in ("ci", "ci=short", "=abc", f"ops=sha256:{'z' * 64}", "ops=sha256:abc"):
        with pytest.raises(ValueError):
            parse_env_keys(bad)


def test_the_key_file_stores_digests_only_and_revocation_applies_at_once(tmp_path):
    store = KeyFile(tmp_path / "keys.json")
    key = store.create("ops")
    assert key.startswith("mw_") and len(key) > 40
    assert key not in store.path.read_text() and digest(key) in store.path.read_text()
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    keys = Keys(store, {})
    assert keys.name_of(key) == "ops" and keys.name_of(key + "x") is None and keys.name_of("x" * 5000) is None
    with pytest.raises(ValueError):
        store.create("ops")  # one active key per name
    assert KeyFile(store.path).revoke("ops") and not KeyFile(store.path).revoke("ops")  # another process revokes
    assert keys.name_of(key) is None  # this one re-reads the changed file
    assert [(e["name"], bool(e["revoked_at"])) for e in store.list()] == [("ops", True)]
    assert all("sha256" not in e for e in store.list())


def test_beyond_loopback_keys_are_required_and_auth_off_is_refused(tmp_path):
    f = tmp_path / "none.json"
    assert configure("127.0.0.1", "auto", None, f)[1] is False
    assert configure("::1", "off", None, f)[1] is False
    with pytest.raises(ExposureError, match="MESHWARD_API_KEYS"):
        configure("0.0.0.0", "auto", None, f)
    with pytest.raises(ExposureError, match="refused"):
        configure("0.0.0.0", "off", "ci=" + "k" * 32, f)
    with pytest.raises(ExposureError):
        configure("127.0.0.1", "required", None, f)
    keys, required = configure("0.0.0.0", "auto", "ci=" + "k" * 32, f)
    assert required and keys.name_of("k" * 32) == "ci"


def test_the_bucket_allows_a_burst_then_refills_at_the_rate():
    bucket = RateLimiter(per_minute=60)
    assert all(bucket.take("a", now=100.0) == 0 for _ in range(60))
    wait = bucket.take("a", now=100.0)
    assert wait == pytest.approx(1.0)
    assert bucket.take("b", now=100.0) == 0  # per caller
    assert bucket.take("a", now=101.0) == 0 and bucket.take("a", now=101.0) > 0


def test_the_bucket_table_is_bounded():
    bucket = RateLimiter(per_minute=10, max_callers=3)
    for i in range(10):
        bucket.take(f"c{i}", now=float(i))
    assert len(bucket._buckets) == 3
