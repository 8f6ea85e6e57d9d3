"""Unit tests for the HTTP API tools (meshward.tools.http_apis) against loopback servers replaying the documented
ipify / ip-api / Open-Meteo response formats. Never touches the public defaults: no internet here."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from meshward.contracts import DataContent, ErrorCode, TextContent
from meshward.tools.http_apis import HttpApis, HttpApiSettings, TTLCache, tools
from meshward.tools.registry import ToolError, ToolRegistry

# --------------------------------------------------------------------------- a scriptable loopback HTTP/1.1 server


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # dict/list -> JSON, bytes/str -> as is
    headers: dict[str, str] = field(default_factory=dict)
    action: str = "respond"  # "respond" | "drop" (close without answering) | "hang" | "drip"
    delay_s: float = 0.0
    content_length: bool = True

    def payload(self) -> bytes:
        if isinstance(self.body, bytes):
            return self.body
        if isinstance(self.body, str):
            return self.body.encode()
        return json.dumps(self.body).encode()


@dataclass
class Seen:
    path: str
    query: dict[str, str]
    headers: dict[str, str]


REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


class FakeUpstream:
    """asyncio server in the test's own loop. `script` replies are used first, in order; then `default(seen)`."""

    def __init__(self, default: Callable[[Seen], Reply]):
        self.default = default
        self.script: list[Reply] = []
        self.requests: list[Seen] = []
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task] = set()

    @property
    def url(self) -> str:
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    @property
    def host(self) -> str:
        return self.url.removeprefix("http://")

    async def start(self) -> FakeUpstream:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self

    async def close(self) -> None:
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._tasks.add(asyncio.current_task())
        try:
            request_line = await reader.readline()
            if not request_line:
                return
            _, target, _ = request_line.decode("latin-1").split(" ", 2)
            headers = {}
            while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
                name, _, value = line.decode("latin-1").partition(":")
                headers[name.strip().lower()] = value.strip()
            parts = urlsplit(target)
            seen = Seen(parts.path, {k: v[0] for k, v in parse_qs(parts.query).items()}, headers)
            self.requests.append(seen)
            reply = self.script.pop(0) if self.script else self.default(seen)
            if reply.action == "drop":
                return
            if reply.action == "hang":
                await asyncio.sleep(reply.delay_s or 30)
                return
            body = reply.payload()
            head = [
                f"HTTP/1.1 {reply.status} {REASONS.get(reply.status, 'X')}",
                "Content-Type: application/json",
                "Connection: close",
            ]
            head += [f"{k}: {v}" for k, v in reply.headers.items()]
            if reply.action == "drip":  # headers now, then a byte at a time: per-read timeouts never fire
                writer.write(("\r\n".join([*head, f"Content-Length: {len(body)}"]) + "\r\n\r\n").encode())
                for i in range(len(body)):
                    await writer.drain()
                    await asyncio.sleep(reply.delay_s)
                    writer.write(body[i : i + 1])
            else:
                if reply.content_length:
                    head.append(f"Content-Length: {len(body)}")
                writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
            await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._tasks.discard(asyncio.current_task())
            writer.close()


# --------------------------------------------------------------------------- documented upstream formats


def ipify_ok(_: Seen) -> Reply:
    return Reply(body={"ip": "81.2.69.142"})


def ip_api_ok(seen: Seen) -> Reply:
    ip = seen.path.rsplit("/", 1)[-1]
    return Reply(
        body={
            "status": "success",
            "country": "France",
            "countryCode": "FR",
            "region": "IDF",
            "regionName": "Île-de-France",
            "city": "Paris",
            "zip": "75001",
            "lat": 48.8566,
            "lon": 2.3522,
            "timezone": "Europe/Paris",
            "isp": "Example ISP",
            "org": "",
            "as": "AS0 Example",
            "query": ip,
        }
    )


def open_meteo_ok(seen: Seen) -> Reply:
    days = int(seen.query.get("forecast_days", "3"))
    dates = [f"2026-06-{d:02d}" for d in range(1, days + 1)]
    return Reply(
        body={
            "latitude": 48.86,
            "longitude": 2.3599997,
            "generationtime_ms": 0.08,
            "utc_offset_seconds": 7200,
            "timezone": "Europe/Paris",
            "timezone_abbreviation": "GMT+2",
            "elevation": 43.0,
            "current_units": {
                "time": "iso8601",
                "interval": "seconds",
                "temperature_2m": "°C",
                "wind_speed_10m": "km/h",
                "relative_humidity_2m": "%",
                "weather_code": "wmo code",
            },
            "current": {
                "time": "2026-06-01T12:00",
                "interval": 900,
                "temperature_2m": 12.3,
                "wind_speed_10m": 8.1,
                "relative_humidity_2m": 70,
                "weather_code": 3,
            },
            "daily_units": {
                "time": "iso8601",
                "temperature_2m_max": "°C",
                "temperature_2m_min": "°C",
                "precipitation_sum": "mm",
            },
            "daily": {
                "time": dates,
                "temperature_2m_max": [15.2, 17.0, None][:days] + [16.0] * max(0, days - 3),
                "temperature_2m_min": [10.0, 9.5, 8.0][:days] + [7.0] * max(0, days - 3),
                "precipitation_sum": [0.4, 0.0, 2.5][:days] + [0.0] * max(0, days - 3),
            },
        }
    )


# --------------------------------------------------------------------------- fixtures


@pytest.fixture
async def ipify():
    server = await FakeUpstream(ipify_ok).start()
    yield server
    await server.close()


@pytest.fixture
async def geo():
    server = await FakeUpstream(ip_api_ok).start()
    yield server
    await server.close()


@pytest.fixture
async def meteo():
    server = await FakeUpstream(open_meteo_ok).start()
    yield server
    await server.close()


@pytest.fixture
def closed_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there any more: connection refused
    return port


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def make_settings(ipify=None, geo=None, meteo=None, closed_port: int = 9, **kw) -> HttpApiSettings:
    dead = f"http://127.0.0.1:{closed_port}"
    base = {"timeout_s": 1.0, "retries": 3, "backoff_base_s": 0.01, "backoff_max_s": 0.05}
    return HttpApiSettings(
        ip_api_url=ipify.url if ipify else dead,
        geo_api_url=geo.url if geo else dead,
        weather_api_url=meteo.url if meteo else dead,
        **{**base, **kw},
    )


@pytest.fixture
async def apis_factory():
    made: list[HttpApis] = []

    def make(*, clock=None, **kw) -> tuple[HttpApis, ToolRegistry]:
        apis = HttpApis(make_settings(**kw), clock=clock or time.monotonic)
        registry = ToolRegistry()
        for tool in apis.tools():
            registry.register(tool)
        made.append(apis)
        return apis, registry

    yield make
    for apis in made:
        await apis.aclose()


async def expect_error(
    registry: ToolRegistry, name: str, arguments: dict, code: ErrorCode, match: str = ""
) -> ToolError:
    with pytest.raises(ToolError) as err:
        await registry.call(name, arguments)
    assert err.value.code == code, err.value.message
    assert match.lower() in err.value.message.lower(), err.value.message
    return err.value


# --------------------------------------------------------------------------- happy paths


async def test_public_ip(ipify, apis_factory):
    _, registry = apis_factory(ipify=ipify)
    result = await registry.call("public_ip", {})
    text, data = result.content
    assert isinstance(text, TextContent) and "81.2.69.142" in text.text
    assert isinstance(data, DataContent) and data.data == {"ip": "81.2.69.142", "version": 4}
    (seen,) = ipify.requests
    assert seen.path == "/" and seen.query == {"format": "json"}
    assert seen.headers["user-agent"].startswith("meshward-tools")


async def test_ip_geolocate(geo, apis_factory):
    _, registry = apis_factory(geo=geo)
    result = await registry.call("ip_geolocate", {"ip": "8.8.8.8"})
    text, data = result.content
    assert text.text == "8.8.8.8 is located in Paris, Île-de-France, France (48.8566, 2.3522; timezone Europe/Paris)."
    assert data.data == {
        "ip": "8.8.8.8",
        "country": "France",
        "country_code": "FR",
        "region": "Île-de-France",
        "city": "Paris",
        "latitude": 48.8566,
        "longitude": 2.3522,
        "timezone": "Europe/Paris",
        "cached": False,
    }
    (seen,) = geo.requests
    assert seen.path == "/json/8.8.8.8"
    assert "lat" in seen.query["fields"].split(",")  # only the fields we use are asked for


async def test_ipv6_geolocate_normalised(geo, apis_factory):
    _, registry = apis_factory(geo=geo)
    result = await registry.call("ip_geolocate", {"ip": "2001:4860:4860:0000:0000:0000:0000:8888"})
    assert result.content[1].data["ip"] == "2001:4860:4860::8888"
    assert geo.requests[0].path == "/json/2001:4860:4860::8888"


async def test_weather_forecast(meteo, apis_factory):
    _, registry = apis_factory(meteo=meteo)
    result = await registry.call("weather_forecast", {"latitude": 48.8534, "longitude": 2.3488})
    text, data = result.content
    assert text.text.startswith(
        "Current weather at 48.8534,2.3488: 12.3 °C, overcast, wind 8.1 km/h, humidity 70%; next days: "
    )
    assert "2026-06-01 10.0 to 15.2 °C, 0.4 mm precipitation" in text.text
    assert "2026-06-03 8.0 to n/a, 2.5 mm precipitation" in text.text  # a null from upstream stays visible
    assert data.data["current"] == {
        "time": "2026-06-01T12:00",
        "temperature_2m": 12.3,
        "wind_speed_10m": 8.1,
        "relative_humidity_2m": 70,
        "weather_code": 3,
        "condition": "overcast",
    }
    assert data.data["current_units"]["temperature_2m"] == "°C"
    assert [d["date"] for d in data.data["daily"]] == ["2026-06-01", "2026-06-02", "2026-06-03"]
    assert data.data["daily"][0] == {
        "date": "2026-06-01",
        "temperature_2m_min": 10.0,
        "temperature_2m_max": 15.2,
        "precipitation_sum": 0.4,
    }
    assert data.data["timezone"] == "Europe/Paris"
    (seen,) = meteo.requests
    assert seen.path == "/v1/forecast"
    assert seen.query == {
        "latitude": "48.8534",
        "longitude": "2.3488",
        "current": "temperature_2m,wind_speed_10m,relative_humidity_2m,weather_code",
        "daily": "temperature_2m_max,temperature_2m_min,precipitation_sum",
        "timezone": "auto",
        "forecast_days": "3",
    }


async def test_weather_days_and_rounding(meteo, apis_factory):
    _, registry = apis_factory(meteo=meteo)
    result = await registry.call("weather_forecast", {"latitude": -33.868819, "longitude": 151.209295, "days": 5})
    assert meteo.requests[0].query["forecast_days"] == "5"
    assert meteo.requests[0].query["latitude"] == "-33.8688"
    assert len(result.content[1].data["daily"]) == 5


async def test_weather_chain(ipify, geo, meteo, apis_factory):
    """The seed's chain: public IP -> location -> weather, each step quoting the previous one's data."""
    # (documentation ranges such as 203.0.113.0/24 are not global, so the fake ipify answers a routable address)
    _, registry = apis_factory(ipify=ipify, geo=geo, meteo=meteo)
    ip = (await registry.call("public_ip", {})).content[1].data["ip"]
    loc = (await registry.call("ip_geolocate", {"ip": ip})).content[1].data
    weather = await registry.call("weather_forecast", {"latitude": loc["latitude"], "longitude": loc["longitude"]})
    assert weather.content[0].text.startswith("Current weather at 48.8566,2.3522")


# --------------------------------------------------------------------------- geolocation cache


async def test_cache_hit_does_not_reach_the_server(geo, apis_factory):
    _, registry = apis_factory(geo=geo)
    first = await registry.call("ip_geolocate", {"ip": "8.8.8.8"})
    second = await registry.call("ip_geolocate", {"ip": " 8.8.8.8 "})
    assert len(geo.requests) == 1
    assert second.content[1].data == {**first.content[1].data, "cached": True}
    assert second.content[0].text == first.content[0].text


async def test_cache_ttl_expiry(geo, apis_factory):
    clock = FakeClock()
    _, registry = apis_factory(geo=geo, clock=clock, geo_cache_ttl_s=60)
    await registry.call("ip_geolocate", {"ip": "1.1.1.1"})
    clock.now += 59
    await registry.call("ip_geolocate", {"ip": "1.1.1.1"})
    assert len(geo.requests) == 1
    clock.now += 2
    await registry.call("ip_geolocate", {"ip": "1.1.1.1"})
    assert len(geo.requests) == 2


async def test_cache_is_bounded_lru(geo, apis_factory):
    apis, registry = apis_factory(geo=geo, geo_cache_size=2)
    for ip in ("1.1.1.1", "8.8.8.8", "1.1.1.1", "9.9.9.9"):  # 8.8.8.8 is least recently used when 9.9.9.9 arrives
        await registry.call("ip_geolocate", {"ip": ip})
    assert len(apis.geo_cache) == 2
    assert len(geo.requests) == 3
    await registry.call("ip_geolocate", {"ip": "1.1.1.1"})
    assert len(geo.requests) == 3
    await registry.call("ip_geolocate", {"ip": "8.8.8.8"})
    assert len(geo.requests) == 4


async def test_failures_are_not_cached(geo, apis_factory):
    _, registry = apis_factory(geo=geo)
    geo.script = [Reply(body={"status": "fail", "message": "something odd", "query": "8.8.4.4"})]
    await expect_error(registry, "ip_geolocate", {"ip": "8.8.4.4"}, ErrorCode.NOT_FOUND, "no location")
    await registry.call("ip_geolocate", {"ip": "8.8.4.4"})
    assert len(geo.requests) == 2


def test_ttl_cache_unit():
    clock = FakeClock()
    cache = TTLCache(max_size=0, ttl_s=10, clock=clock)
    cache.put("a", 1)
    assert cache.get("a") is None  # size 0 disables
    cache = TTLCache(max_size=3, ttl_s=10, clock=clock)
    cache.put("a", 1)
    clock.now += 10
    assert cache.get("a") is None and len(cache) == 0


# --------------------------------------------------------------------------- input validation (no request made)


@pytest.mark.parametrize(
    "ip",
    [
        "10.0.0.1",
        "192.168.1.20",
        "203.0.113.7",
        "127.0.0.1",
        "::1",
        "fe80::1",
        "169.254.1.1",
        "100.64.0.1",
        "::ffff:192.168.1.1",
        "0.0.0.0",
    ],
)
async def test_private_addresses_rejected(geo, apis_factory, ip):
    _, registry = apis_factory(geo=geo)
    await expect_error(registry, "ip_geolocate", {"ip": ip}, ErrorCode.BAD_REQUEST, "private address")
    assert geo.requests == []


@pytest.mark.parametrize(
    "arguments",
    [
        {"ip": "not-an-ip"},
        {"ip": "1.2.3.4.5"},
        {"ip": "999.1.1.1"},
        {},
        {"ip": "8.8.8.8", "extra": 1},
        {"ip": "1" * 100},
    ],
)
async def test_bad_ip_arguments(geo, apis_factory, arguments):
    _, registry = apis_factory(geo=geo)
    await expect_error(registry, "ip_geolocate", arguments, ErrorCode.BAD_REQUEST)
    assert geo.requests == []


@pytest.mark.parametrize(
    "arguments",
    [
        {"latitude": 90.5, "longitude": 0},
        {"latitude": -91, "longitude": 0},
        {"latitude": 0, "longitude": 180.01},
        {"latitude": 0, "longitude": -181},
        {"latitude": float("nan"), "longitude": 0},
        {"latitude": 0, "longitude": float("inf")},
        {"latitude": "north", "longitude": 0},
        {"latitude": 0},
        {"latitude": 0, "longitude": 0, "days": 30},
        {"latitude": 0, "longitude": 0, "units": "imperial"},
    ],
)
async def test_bad_coordinates(meteo, apis_factory, arguments):
    _, registry = apis_factory(meteo=meteo)
    await expect_error(registry, "weather_forecast", arguments, ErrorCode.BAD_REQUEST)
    assert meteo.requests == []


async def test_public_ip_takes_no_arguments(ipify, apis_factory):
    _, registry = apis_factory(ipify=ipify)
    await expect_error(registry, "public_ip", {"ip": "1.2.3.4"}, ErrorCode.BAD_REQUEST)


# --------------------------------------------------------------------------- retries: transient failures only


async def test_retry_after_dropped_connections(meteo, apis_factory):
    _, registry = apis_factory(meteo=meteo)
    meteo.script = [Reply(action="drop"), Reply(action="drop")]
    result = await registry.call("weather_forecast", {"latitude": 1, "longitude": 2})
    assert "12.3 °C" in result.content[0].text
    assert len(meteo.requests) == 3


def spy_attempts(apis: HttpApis, monkeypatch) -> list[int | str]:
    """How each attempt of `apis` ended: the HTTP status, "timeout" (cut by the per-attempt deadline or an httpx
    timeout) or the name of the exception."""
    attempts: list[int | str] = []
    real_fetch = apis._fetch

    async def spy(url, params):
        try:
            status, body = await real_fetch(url, params)
        except (asyncio.CancelledError, httpx.TimeoutException):
            attempts.append("timeout")
            raise
        except Exception as e:
            attempts.append(type(e).__name__)
            raise
        attempts.append(status)
        return status, body

    monkeypatch.setattr(apis, "_fetch", spy)
    return attempts


async def test_retry_after_timeout(ipify, apis_factory, monkeypatch):
    apis, registry = apis_factory(ipify=ipify, timeout_s=0.5)
    attempts = spy_attempts(apis, monkeypatch)
    ipify.script = [Reply(action="hang", delay_s=10)]
    result = await registry.call("public_ip", {})
    assert result.content[1].data["ip"] == "81.2.69.142"
    assert len(ipify.requests) == 2
    # the hung attempt was cut by the 0.5 s deadline (not ended by the server's 10 s hang), then retried until the
    # answer came (on a loaded box a retry may time out too, before the server has parsed it)
    assert attempts[0] == "timeout" and attempts[-1] == 200
    assert set(attempts[:-1]) == {"timeout"}


async def test_slow_drip_is_cut_by_the_total_deadline(ipify, apis_factory, monkeypatch):
    # each byte arrives well within any per-read timeout; the whole body would take ~10 s
    apis, registry = apis_factory(ipify=ipify, timeout_s=0.5, retries=1)
    attempts = spy_attempts(apis, monkeypatch)
    ipify.script = [Reply(body={"ip": "81.2.69.142", "pad": "x" * 100}, action="drip", delay_s=0.08)] * 2
    await expect_error(registry, "public_ip", {}, ErrorCode.UNAVAILABLE, "timed out after 0.5s (2 attempts)")
    assert len(ipify.requests) >= 1  # (on a loaded box the 2nd attempt may time out before the server parsed it)
    # both attempts were cut by the total deadline while the body was still dripping: neither got a response
    assert attempts == ["timeout", "timeout"]


async def test_retry_on_5xx_then_success(geo, apis_factory):
    _, registry = apis_factory(geo=geo)
    geo.script = [Reply(status=503, body="busy"), Reply(status=500, body={"error": "x"})]
    result = await registry.call("ip_geolocate", {"ip": "8.8.8.8"})
    assert result.content[1].data["city"] == "Paris"
    assert len(geo.requests) == 3


async def test_5xx_exhausts_retries(meteo, apis_factory):
    _, registry = apis_factory(meteo=meteo, retries=2)
    meteo.script = [Reply(status=503, body="busy")] * 10
    err = await expect_error(registry, "weather_forecast", {"latitude": 1, "longitude": 2}, ErrorCode.UNAVAILABLE)
    assert err.message == f"weather service unreachable at {meteo.host}: HTTP 503 (3 attempts)"
    assert len(meteo.requests) == 3


@pytest.mark.parametrize(
    ("reply", "code", "match"),
    [
        (Reply(status=404, body={"error": True, "reason": "Not Found"}), ErrorCode.NOT_FOUND, "HTTP 404"),
        (
            Reply(status=400, body={"error": True, "reason": "Latitude must be in range of -90 to 90°. Given: 100.0."}),
            ErrorCode.BAD_REQUEST,
            "Latitude must be in range of -90 to 90°",
        ),
        (Reply(status=422, body="unprocessable"), ErrorCode.BAD_REQUEST, "HTTP 422): unprocessable"),
        (
            Reply(status=429, body={"error": True, "reason": "Too many requests"}),
            ErrorCode.UNAVAILABLE,
            "rate-limiting",
        ),
        (
            Reply(status=301, headers={"Location": "http://example.com/"}, body=""),
            ErrorCode.UNAVAILABLE,
            "unexpected HTTP 301",
        ),
    ],
)
async def test_no_retry_on_4xx(meteo, apis_factory, reply, code, match):
    _, registry = apis_factory(meteo=meteo)
    meteo.script = [reply] * 5
    await expect_error(registry, "weather_forecast", {"latitude": 1, "longitude": 2}, code, match)
    assert len(meteo.requests) == 1


async def test_unreachable_upstream_is_unavailable_quickly(apis_factory, closed_port, monkeypatch):
    apis, registry = apis_factory(closed_port=closed_port)
    attempts = spy_attempts(apis, monkeypatch)
    backoffs: list[float] = []
    real_backoff = apis._backoff

    def spy_backoff(attempt: int) -> float:
        backoffs.append(real_backoff(attempt))
        return backoffs[-1]

    monkeypatch.setattr(apis, "_backoff", spy_backoff)
    err = await expect_error(registry, "weather_forecast", {"latitude": 1, "longitude": 2}, ErrorCode.UNAVAILABLE)
    assert err.message.startswith(f"weather service unreachable at 127.0.0.1:{closed_port}: ConnectError")
    assert err.message.endswith("(4 attempts)")
    # quick: every attempt was refused outright (no attempt waited for its timeout), with only the short,
    # capped backoffs in between (0.01 s base, 0.05 s cap)
    assert attempts == ["ConnectError"] * 4
    assert len(backoffs) == 3 and all(0 < d <= 0.05 for d in backoffs)
    await expect_error(registry, "public_ip", {}, ErrorCode.UNAVAILABLE, "public IP service unreachable")
    await expect_error(
        registry, "ip_geolocate", {"ip": "8.8.8.8"}, ErrorCode.UNAVAILABLE, "geolocation service unreachable"
    )


def test_backoff_is_exponential_capped_and_jittered():
    apis = HttpApis(make_settings(backoff_base_s=0.2, backoff_max_s=1.0))
    for attempt, full in [(1, 0.2), (2, 0.4), (3, 0.8), (4, 1.0), (8, 1.0)]:
        delays = {apis._backoff(attempt) for _ in range(50)}
        assert all(full / 2 <= d <= full for d in delays)
        assert len(delays) > 1  # jittered


def test_tool_timeout_covers_every_attempt():
    apis = HttpApis(
        HttpApiSettings(
            ip_api_url="http://127.0.0.1:9", geo_api_url="http://127.0.0.1:9", weather_api_url="http://127.0.0.1:9"
        )
    )
    # defaults: 4 attempts x 5 s + backoffs 0.2 + 0.4 + 0.8 + 1 s margin
    assert apis.tool_timeout_s() == pytest.approx(22.4)
    assert [t.timeout_s for t in apis.tools()] == pytest.approx([22.4, 22.4, 22.4])


# --------------------------------------------------------------------------- malformed upstream answers


@pytest.mark.parametrize(
    ("reply", "match"),
    [
        (Reply(body="<html>hello</html>"), "malformed response (not JSON)"),
        (Reply(body={"latitude": 1.0}), "malformed response: current"),
        (Reply(body={"current": {"temperature_2m": "warm"}}), "malformed response: current.temperature_2m"),
        (Reply(body=[1, 2, 3]), "malformed response"),
        (
            Reply(
                body={
                    "current": {"temperature_2m": 1.0},
                    "daily": {"time": ["2026-06-01", "2026-06-02"], "temperature_2m_max": [1.0]},
                }
            ),
            "daily.temperature_2m_max length",
        ),
    ],
)
async def test_malformed_weather_response(meteo, apis_factory, reply, match):
    _, registry = apis_factory(meteo=meteo)
    meteo.script = [reply]
    await expect_error(registry, "weather_forecast", {"latitude": 1, "longitude": 2}, ErrorCode.UNAVAILABLE, match)
    assert len(meteo.requests) == 1  # a malformed answer is not retried


async def test_minimal_weather_response(meteo, apis_factory):
    _, registry = apis_factory(meteo=meteo)
    meteo.script = [Reply(body={"current": {"temperature_2m": 20.0, "weather_code": 999}})]
    result = await registry.call("weather_forecast", {"latitude": 1, "longitude": 2})
    assert result.content[0].text == "Current weather at 1,2: 20.0 °C, wind n/a, humidity n/a."


async def test_malformed_ipify_and_ip_api(ipify, geo, apis_factory):
    _, registry = apis_factory(ipify=ipify, geo=geo)
    ipify.script = [Reply(body={"ip": "not.an.address"})]
    await expect_error(registry, "public_ip", {}, ErrorCode.UNAVAILABLE, "malformed address")
    ipify.script = [Reply(body={"address": "1.2.3.4"})]
    await expect_error(registry, "public_ip", {}, ErrorCode.UNAVAILABLE, "malformed response: ip")
    geo.script = [Reply(body={"status": "success", "city": "Nowhere"})]
    await expect_error(registry, "ip_geolocate", {"ip": "8.8.8.8"}, ErrorCode.UNAVAILABLE, "no coordinates")
    geo.script = [Reply(body={"status": "success", "lat": 123.0, "lon": 2.0})]
    await expect_error(registry, "ip_geolocate", {"ip": "8.8.8.8"}, ErrorCode.UNAVAILABLE, "malformed response: lat")


@pytest.mark.parametrize(
    ("message", "code", "match"),
    [
        ("private range", ErrorCode.BAD_REQUEST, "private address"),
        ("reserved range", ErrorCode.BAD_REQUEST, "private address"),
        ("invalid query", ErrorCode.BAD_REQUEST, "invalid query"),
    ],
)
async def test_ip_api_fail_status(geo, apis_factory, message, code, match):
    _, registry = apis_factory(geo=geo)
    geo.script = [Reply(body={"status": "fail", "message": message, "query": "8.8.8.8"})]
    await expect_error(registry, "ip_geolocate", {"ip": "8.8.8.8"}, code, match)


async def test_oversized_response(meteo, apis_factory):
    _, registry = apis_factory(meteo=meteo, max_response_bytes=4096)
    big = {"current": {"temperature_2m": 1.0}, "pad": "x" * 10_000}
    meteo.script = [Reply(body=big)]
    await expect_error(
        registry,
        "weather_forecast",
        {"latitude": 1, "longitude": 2},
        ErrorCode.UNAVAILABLE,
        "oversized response (declares",
    )


async def test_oversized_chunked_response(meteo, apis_factory):
    """No Content-Length to check up front: the cap is enforced while reading."""
    _, registry = apis_factory(meteo=meteo, max_response_bytes=4096)
    payload = json.dumps({"current": {"temperature_2m": 1.0}, "pad": "x" * 10_000}).encode()
    chunked = (
        b"".join(
            b"%x\r\n%s\r\n" % (len(payload[i : i + 1000]), payload[i : i + 1000]) for i in range(0, len(payload), 1000)
        )
        + b"0\r\n\r\n"
    )
    meteo.script = [Reply(body=chunked, headers={"Transfer-Encoding": "chunked"}, content_length=False)]
    await expect_error(
        registry,
        "weather_forecast",
        {"latitude": 1, "longitude": 2},
        ErrorCode.UNAVAILABLE,
        "oversized response (over 4096 bytes)",
    )


# --------------------------------------------------------------------------- lifecycle, settings, schema


async def test_one_shared_client_closed_by_aclose(ipify):
    apis = HttpApis(make_settings(ipify=ipify))
    assert apis._client is None  # lazy
    await apis.public_ip()
    client = apis.client
    await apis.public_ip()
    assert apis.client is client
    await apis.aclose()
    assert client.is_closed and apis._client is None
    await apis.public_ip()  # a later call opens a fresh one
    await apis.aclose()
    await apis.aclose()  # idempotent


async def test_async_context_manager(ipify):
    async with HttpApis(make_settings(ipify=ipify)) as apis:
        await apis.public_ip()
        client = apis.client
    assert client.is_closed


def test_settings_from_environment(monkeypatch):
    monkeypatch.setenv("MESHWARD_IP_API_URL", "http://ip.internal:8080/")
    monkeypatch.setenv("MESHWARD_GEO_API_URL", "http://geo.internal")
    monkeypatch.setenv("MESHWARD_WEATHER_API_URL", "https://weather.internal/base")
    monkeypatch.setenv("MESHWARD_HTTP_RETRIES", "1")
    monkeypatch.setenv("IP_API_URL", "http://unprefixed.example")  # never read
    s = HttpApiSettings()
    assert (s.ip_api_url, s.geo_api_url, s.weather_api_url) == (
        "http://ip.internal:8080",
        "http://geo.internal",
        "https://weather.internal/base",
    )
    assert s.retries == 1


def test_settings_defaults_and_validation(monkeypatch):
    for name in ("MESHWARD_IP_API_URL", "MESHWARD_GEO_API_URL", "MESHWARD_WEATHER_API_URL"):
        monkeypatch.delenv(name, raising=False)
    s = HttpApiSettings()
    assert (s.ip_api_url, s.geo_api_url, s.weather_api_url) == (
        "https://api.ipify.org",
        "http://ip-api.com",
        "https://api.open-meteo.com",
    )
    assert (s.timeout_s, s.retries, s.backoff_base_s, s.geo_cache_ttl_s, s.geo_cache_size) == (5, 3, 0.2, 3600, 1024)
    with pytest.raises(ValueError):
        HttpApiSettings(weather_api_url="file:///etc/passwd")
    with pytest.raises(ValueError):
        HttpApiSettings(retries=-1)


def test_tools_factory_and_schemas():
    made = tools(make_settings())
    assert [t.name for t in made] == ["public_ip", "ip_geolocate", "weather_forecast"]
    specs = {t.name: t.spec().input_schema for t in made}
    assert specs["public_ip"]["properties"] == {}
    assert specs["ip_geolocate"]["required"] == ["ip"]
    lat = specs["weather_forecast"]["properties"]["latitude"]
    assert (lat["minimum"], lat["maximum"]) == (-90, 90)
    lon = specs["weather_forecast"]["properties"]["longitude"]
    assert (lon["minimum"], lon["maximum"]) == (-180, 180)
    assert all(s["additionalProperties"] is False for s in specs.values())
