"""API keys, rate limits and CORS over a real socket: the supervisor app served by uvicorn (agents in-process)."""
from __future__ import annotations

import pytest
from meshward.devstack.cli import main as meshward
from meshward.devstack.nats_server import free_port
from meshward.supervisor.auth import AuthMiddleware, Keys
from meshward.supervisor.settings import SupervisorSettings

from tests.served import serve

pytestmark = pytest.mark.integration

CI_KEY = "ci-key-" + "k" * 32
ORIGIN = "http://console.example"


def settings_for(tmp_path, **kw) -> SupervisorSettings:
    base = {"http_port": free_port(), "checkpoint_db": tmp_path / "cp.db", "api_keys_file": tmp_path / "keys.json", "auth": "required",
            "api_keys": f"ci={CI_KEY}", "rate_limit_per_minute": 600}
    return SupervisorSettings(**{**base, **kw})


ASK = {"question": "Calculate 2 + 2"}


async def test_keys_are_required_in_either_header_and_never_echoed(tmp_path):
    async with serve(settings_for(tmp_path)) as http:
        r = await http.post("/v1/ask", json=ASK)
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized" and "X-Api-Key" in r.json()["error"]["message"]
        assert "Bearer" in r.headers["www-authenticate"]
        assert (await http.post("/v1/ask", json=ASK, headers={"X-Api-Key": CI_KEY})).status_code == 200
        assert (await http.post("/v1/ask", json=ASK, headers={"Authorization": f"Bearer {CI_KEY}"})).status_code == 200
        wrong = await http.post("/v1/ask", json=ASK, headers={"X-Api-Key": CI_KEY + "x"})
        assert wrong.status_code == 401 and CI_KEY not in wrong.text
        # the console's page loads without a key (its calls carry one); the probes too
        assert (await http.get("/")).status_code == 200 and (await http.get("/healthz")).status_code == 200
        assert (await http.get("/v1/insights")).status_code == 401


async def test_a_key_made_by_the_cli_works_until_revoked(tmp_path, capsys):
    settings = settings_for(tmp_path, api_keys=None)
    assert meshward(["keys", "create", "ops", "--file", str(settings.api_keys_file)]) == 0
    key = capsys.readouterr().out.strip()
    async with serve(settings) as http:
        assert (await http.post("/v1/ask", json=ASK, headers={"X-Api-Key": key})).status_code == 200
        assert meshward(["keys", "list", "--file", str(settings.api_keys_file)]) == 0
        assert "ops" in capsys.readouterr().out and key not in settings.api_keys_file.read_text()
        assert meshward(["keys", "revoke", "ops", "--file", str(settings.api_keys_file)]) == 0
        assert (await http.post("/v1/ask", json=ASK, headers={"X-Api-Key": key})).status_code == 401
    assert meshward(["keys", "revoke", "ops", "--file", str(settings.api_keys_file)]) == 1
    assert meshward(["keys", "create", "bad name!", "--file", str(settings.api_keys_file)]) == 2


async def test_over_the_limit_is_429_with_retry_after_per_key(tmp_path):
    async with serve(settings_for(tmp_path, rate_limit_per_minute=3, api_keys=f"ci={CI_KEY},other={'o' * 32}")) as http:
        codes = [(await http.post("/v1/ask", json=ASK, headers={"X-Api-Key": CI_KEY})).status_code for _ in range(4)]
        assert codes == [200, 200, 200, 429]
        r = await http.post("/v1/ask", json=ASK, headers={"X-Api-Key": CI_KEY})
        assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1 and r.json()["error"]["code"] == "rate_limited"
        assert (await http.post("/v1/ask", json=ASK, headers={"X-Api-Key": "o" * 32})).status_code == 200  # its own bucket


async def test_cors_preflight_names_only_the_configured_origins(tmp_path):
    async with serve(settings_for(tmp_path, cors_origins=[ORIGIN])) as http:
        pre = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "x-api-key,content-type"}
        ok = await http.options("/v1/ask", headers={"Origin": ORIGIN, **pre})
        assert ok.status_code == 200 and ok.headers["access-control-allow-origin"] == ORIGIN
        assert "x-api-key" in ok.headers["access-control-allow-headers"].lower()
        other = await http.options("/v1/ask", headers={"Origin": "http://evil.example", **pre})
        assert "access-control-allow-origin" not in other.headers


async def test_loopback_without_keys_is_open_and_named_local(tmp_path):
    async with serve(settings_for(tmp_path, auth="auto", api_keys=None)) as http:
        assert (await http.post("/v1/ask", json=ASK)).status_code == 200
        # no keys configured: a sent key has nothing to be checked against
        assert (await http.post("/v1/ask", json=ASK, headers={"X-Api-Key": "not-a-key-" * 3})).status_code == 200
    async with serve(settings_for(tmp_path, auth="auto")) as http:  # optional, but keys exist: a wrong one is refused
        assert (await http.post("/v1/ask", json=ASK)).status_code == 200
        assert (await http.post("/v1/ask", json=ASK, headers={"X-Api-Key": "not-a-key-" * 3})).status_code == 401


async def test_an_unauthenticated_remote_callers_traceparent_is_dropped():
    seen = []

    async def app(scope, receive, send):
        seen.append((dict(scope["headers"]), scope["state"]["principal"]))

    from meshward.supervisor.auth import digest

    middleware = AuthMiddleware(app, Keys(None, {digest(CI_KEY): "ci"}), required=False, limiter=None)
    headers = [(b"traceparent", b"00-" + b"a" * 32 + b"-" + b"b" * 16 + b"-01"), (b"host", b"x")]
    for client in (("10.1.2.3", 5000), ("127.0.0.1", 5000)):
        await middleware({"type": "http", "path": "/v1/ask", "method": "POST", "headers": list(headers), "client": client}, None, None)
    assert b"traceparent" not in seen[0][0] and seen[0][1] == "local"
    assert b"traceparent" in seen[1][0]  # this machine's callers keep their trace context
    await middleware({"type": "http", "path": "/v1/ask", "method": "POST", "headers": [*headers, (b"x-api-key", CI_KEY.encode())], "client": ("10.1.2.3", 5000)}, None, None)
    assert b"traceparent" in seen[2][0] and seen[2][1] == "ci"  # an authenticated caller's too


async def test_405_answers_carry_allow(tmp_path):
    async with serve(settings_for(tmp_path, auth="auto", api_keys=None)) as http:
        r = await http.delete("/v1/ask")
        assert r.status_code == 405 and "POST" in r.headers["allow"] and r.json()["error"]["code"] == "http_error"
