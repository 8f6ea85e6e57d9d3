"""HTTP API tools: `public_ip` (ipify), `ip_geolocate` (ip-api) and `weather_forecast` (Open-Meteo).

One ``HttpApis`` instance owns one lazily created ``httpx.AsyncClient`` (connection pooling across calls) and the
geolocation cache; close it with ``await apis.aclose()``. ``tools(settings)`` is the short form for a registry that
never closes it (the process exit does).

Transport policy, the same for the three upstreams:

* every attempt has a *total* deadline (``timeout_s``, enforced with ``asyncio.timeout`` around connect + send +
  reading the body, so a slow-drip server cannot hold a call open), and the body is read up to
  ``max_response_bytes`` (decoded, so a gzip bomb is cut too) -- over it is a malformed upstream (``unavailable``);
* retries (``retries`` more attempts, exponential backoff ``backoff_base_s * 2**n`` with "equal jitter", capped at
  ``backoff_max_s``) happen ONLY on connection errors, timeouts, a dropped connection, and HTTP 5xx: the requests are
  idempotent GETs and a 5xx from these services is transient (overloaded gateway, deploy) far more often than not;
* never on 4xx: 404 -> ``not_found``, 429 -> ``unavailable`` ("rate-limited", retrying in-call only digs deeper),
  other 4xx -> ``bad_request`` with the upstream's reason; 3xx (redirects are not followed) -> ``unavailable``;
* still failing after the last attempt -> ``unavailable``: "<service> unreachable at <host>: <last error>";
  a body that is not the documented JSON -> ``unavailable`` ("malformed response"), never a traceback.

The Tool timeout of each tool is derived from these settings (every attempt plus every backoff, plus 1 s), so the
registry's deadline never cuts the retry loop short of its own "unreachable" error.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import math
import random
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx
from meshward.contracts import DataContent, ErrorCode, TextContent
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from .registry import Tool, ToolError

# --------------------------------------------------------------------------- settings


class HttpApiSettings(BaseSettings):
    """Base URLs: MESHWARD_IP_API_URL, MESHWARD_GEO_API_URL, MESHWARD_WEATHER_API_URL; the rest MESHWARD_HTTP_<NAME>."""

    model_config = SettingsConfigDict(env_prefix="MESHWARD_HTTP_", extra="ignore", populate_by_name=True)

    ip_api_url: str = Field(default="https://api.ipify.org", validation_alias="MESHWARD_IP_API_URL")
    geo_api_url: str = Field(default="http://ip-api.com", validation_alias="MESHWARD_GEO_API_URL")
    weather_api_url: str = Field(default="https://api.open-meteo.com", validation_alias="MESHWARD_WEATHER_API_URL")
    timeout_s: float = Field(default=5.0, gt=0, le=60, description="total deadline of one attempt")
    retries: int = Field(
        default=3, ge=0, le=10, description="extra attempts after the first, on transient failures only"
    )
    backoff_base_s: float = Field(default=0.2, ge=0, le=10)
    backoff_max_s: float = Field(default=2.0, ge=0, le=30)
    geo_cache_ttl_s: float = Field(default=3600.0, ge=0)
    geo_cache_size: int = Field(default=1024, ge=0, le=1_000_000, description="0 disables the cache")
    max_response_bytes: int = Field(default=1_000_000, ge=1024, le=50_000_000)
    user_agent: str = "meshward-tools/0.1"

    @field_validator("ip_api_url", "geo_api_url", "weather_api_url")
    @classmethod
    def _http_url(cls, v: str) -> str:
        parts = urlsplit(v.strip())
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"not an http(s) base URL: {v!r}")
        return v.strip().rstrip("/")


# --------------------------------------------------------------------------- argument models


class PublicIpArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


class IpGeolocateArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ip: str = Field(min_length=2, max_length=45, description="a public IPv4 or IPv6 address, e.g. '8.8.8.8'")

    @field_validator("ip")
    @classmethod
    def _parse(cls, v: str) -> str:
        try:
            return ipaddress.ip_address(v.strip()).compressed
        except ValueError:
            raise ValueError(f"not an IP address: {v!r}") from None


class WeatherForecastArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    latitude: float = Field(ge=-90, le=90, allow_inf_nan=False, description="latitude in decimal degrees, -90..90")
    longitude: float = Field(
        ge=-180, le=180, allow_inf_nan=False, description="longitude in decimal degrees, -180..180"
    )
    days: int = Field(default=3, ge=1, le=7, description="number of forecast days, today included (1..7)")


# --------------------------------------------------------------------------- upstream response models


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _IpifyResponse(_Lenient):
    ip: str


class _IpApiResponse(_Lenient):
    status: str
    message: str | None = None
    query: str | None = None
    country: str | None = None
    countryCode: str | None = None  # noqa: N815  (upstream field name)
    regionName: str | None = None  # noqa: N815
    city: str | None = None
    lat: float | None = Field(default=None, ge=-90, le=90)
    lon: float | None = Field(default=None, ge=-180, le=180)
    timezone: str | None = None


class _OmCurrent(_Lenient):
    time: str | None = None
    temperature_2m: float | None = None
    wind_speed_10m: float | None = None
    relative_humidity_2m: float | None = None
    weather_code: int | None = None


class _OmDaily(_Lenient):
    time: list[str] = Field(max_length=31)
    temperature_2m_max: list[float | None] = Field(default_factory=list, max_length=31)
    temperature_2m_min: list[float | None] = Field(default_factory=list, max_length=31)
    precipitation_sum: list[float | None] = Field(default_factory=list, max_length=31)


class _OmResponse(_Lenient):
    latitude: float | None = None
    longitude: float | None = None
    timezone: str | None = None
    elevation: float | None = None
    current: _OmCurrent
    current_units: dict[str, str] = Field(default_factory=dict)
    daily: _OmDaily | None = None
    daily_units: dict[str, str] = Field(default_factory=dict)


# WMO weather interpretation codes, as documented by Open-Meteo.
WMO_CODES: dict[int, str] = {
    0: "clear sky",
    1: "mainly clear",
    2: "partly cloudy",
    3: "overcast",
    45: "fog",
    48: "depositing rime fog",
    51: "light drizzle",
    53: "moderate drizzle",
    55: "dense drizzle",
    56: "light freezing drizzle",
    57: "dense freezing drizzle",
    61: "slight rain",
    63: "moderate rain",
    65: "heavy rain",
    66: "light freezing rain",
    67: "heavy freezing rain",
    71: "slight snowfall",
    73: "moderate snowfall",
    75: "heavy snowfall",
    77: "snow grains",
    80: "slight rain showers",
    81: "moderate rain showers",
    82: "violent rain showers",
    85: "slight snow showers",
    86: "heavy snow showers",
    95: "thunderstorm",
    96: "thunderstorm with slight hail",
    99: "thunderstorm with heavy hail",
}


# --------------------------------------------------------------------------- cache


class TTLCache:
    """A bounded in-memory LRU with a per-entry time-to-live (monotonic clock). Not thread-safe: one event loop."""

    def __init__(self, max_size: int, ttl_s: float, clock: Callable[[], float] = time.monotonic):
        self.max_size = max_size
        self.ttl_s = ttl_s
        self._clock = clock
        self._data: OrderedDict[str, tuple[float, Any]] = OrderedDict()

    def get(self, key: str) -> Any | None:
        item = self._data.get(key)
        if item is None:
            return None
        expires, value = item
        if self._clock() >= expires:
            del self._data[key]
            return None
        self._data.move_to_end(key)
        return value

    def put(self, key: str, value: Any) -> None:
        if self.max_size <= 0 or self.ttl_s <= 0:
            return
        self._data[key] = (self._clock() + self.ttl_s, value)
        self._data.move_to_end(key)
        while len(self._data) > self.max_size:
            self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)

    def clear(self) -> None:
        self._data.clear()


# --------------------------------------------------------------------------- client


class _TooLarge(Exception):
    pass


def _fmt(value: float | None, unit: str = "", digits: int = 1) -> str:
    if value is None or not math.isfinite(value):
        return "n/a"
    text = f"{value:.{digits}f}"
    if unit in ("", "%"):
        return f"{text}{unit}"
    return f"{text} {unit}"


def _coord(value: float) -> str:
    return f"{round(value, 4):g}"


def _upstream_reason(body: bytes) -> str:
    """The short human reason in a 4xx body: Open-Meteo's {"reason"}, ip-api's {"message"}, or the text."""
    try:
        doc = json.loads(body)
        if isinstance(doc, dict):
            for key in ("reason", "message", "error"):
                if isinstance(doc.get(key), str):
                    return doc[key][:300]
    except ValueError:
        pass
    return body[:200].decode("utf-8", "replace").strip() or "no details"


class HttpApis:
    """The three HTTP API tools over one shared client and one geolocation cache."""

    def __init__(
        self,
        settings: HttpApiSettings | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.settings = settings or HttpApiSettings()
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        self.geo_cache = TTLCache(self.settings.geo_cache_size, self.settings.geo_cache_ttl_s, clock)

    # ----------------------------------------------------------------- plumbing

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None or self._client.is_closed:
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(self.settings.timeout_s),
                headers={"User-Agent": self.settings.user_agent, "Accept": "application/json"},
                follow_redirects=False,
                limits=httpx.Limits(max_connections=32, max_keepalive_connections=8),
                transport=self._transport,
            )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()

    async def __aenter__(self) -> HttpApis:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _backoff(self, attempt: int) -> float:
        """Delay before retry number `attempt` (1-based): exponential, capped, with equal jitter."""
        s = self.settings
        delay = min(s.backoff_max_s, s.backoff_base_s * (2 ** (attempt - 1)))
        return delay / 2 + random.uniform(0, delay / 2)

    def tool_timeout_s(self) -> float:
        s = self.settings
        backoffs = sum(min(s.backoff_max_s, s.backoff_base_s * 2**i) for i in range(s.retries))
        return s.timeout_s * (s.retries + 1) + backoffs + 1.0

    async def _fetch(self, url: str, params: dict[str, Any] | None) -> tuple[int, bytes]:
        cap = self.settings.max_response_bytes
        async with self.client.stream("GET", url, params=params) as resp:
            declared = resp.headers.get("content-length")
            if declared is not None and declared.isdigit() and int(declared) > cap:
                raise _TooLarge(f"declares {declared} bytes")
            body = bytearray()
            async for chunk in resp.aiter_bytes():
                body += chunk
                if len(body) > cap:
                    raise _TooLarge(f"over {cap} bytes")
            return resp.status_code, bytes(body)

    async def get_json(self, service: str, url: str, params: dict[str, Any] | None = None) -> Any:
        """GET `url` with the retry policy of this module; the parsed JSON, or a ToolError."""
        s = self.settings
        host = urlsplit(url).netloc
        attempts = s.retries + 1
        last = "no attempt made"
        for attempt in range(attempts):
            if attempt:
                await asyncio.sleep(self._backoff(attempt))
            try:
                async with asyncio.timeout(s.timeout_s):
                    status, body = await self._fetch(url, params)
            except (TimeoutError, httpx.TimeoutException):
                last = f"timed out after {s.timeout_s:g}s"
                continue
            except (httpx.NetworkError, httpx.RemoteProtocolError) as e:
                last = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
                continue
            except _TooLarge as e:
                raise ToolError(
                    ErrorCode.UNAVAILABLE, f"{service} at {host} sent an oversized response ({e})"
                ) from None
            except httpx.HTTPError as e:  # protocol/decoding errors that a retry will not fix
                raise ToolError(ErrorCode.UNAVAILABLE, f"{service} at {host} failed: {type(e).__name__}: {e}") from None
            if status >= 500:
                last = f"HTTP {status}"
                continue
            if status == 404:
                raise ToolError(
                    ErrorCode.NOT_FOUND, f"{service} at {host}: not found (HTTP 404): {_upstream_reason(body)}"
                )
            if status == 429:
                raise ToolError(
                    ErrorCode.UNAVAILABLE, f"{service} at {host} is rate-limiting us (HTTP 429); try again later"
                )
            if 400 <= status < 500:
                raise ToolError(
                    ErrorCode.BAD_REQUEST,
                    f"{service} at {host} rejected the request (HTTP {status}): {_upstream_reason(body)}",
                )
            if not 200 <= status < 300:
                raise ToolError(ErrorCode.UNAVAILABLE, f"{service} at {host} answered an unexpected HTTP {status}")
            try:
                return json.loads(body)
            except ValueError:
                raise ToolError(
                    ErrorCode.UNAVAILABLE, f"{service} at {host} returned a malformed response (not JSON)"
                ) from None
        plural = "s" if attempts != 1 else ""
        raise ToolError(ErrorCode.UNAVAILABLE, f"{service} unreachable at {host}: {last} ({attempts} attempt{plural})")

    @staticmethod
    def _parse(model: type[BaseModel], doc: Any, service: str) -> Any:
        try:
            return model.model_validate(doc)
        except ValidationError as e:
            first = e.errors()[0]
            loc = ".".join(str(p) for p in first.get("loc", ())) or "body"
            raise ToolError(
                ErrorCode.UNAVAILABLE, f"{service} returned a malformed response: {loc}: {first.get('msg')}"
            ) from None

    # ----------------------------------------------------------------- tools

    async def public_ip(self, _: PublicIpArgs | None = None):
        doc = await self.get_json("public IP service", f"{self.settings.ip_api_url}/", {"format": "json"})
        parsed = self._parse(_IpifyResponse, doc, "public IP service")
        try:
            ip = ipaddress.ip_address(parsed.ip.strip())
        except ValueError:
            raise ToolError(
                ErrorCode.UNAVAILABLE, f"public IP service returned a malformed address: {parsed.ip[:60]!r}"
            ) from None
        return [
            TextContent(text=f"The public IP address of this deployment is {ip.compressed} (IPv{ip.version})."),
            DataContent(data={"ip": ip.compressed, "version": ip.version}),
        ]

    async def ip_geolocate(self, args: IpGeolocateArgs):
        ip = ipaddress.ip_address(args.ip)
        if ip.version == 6 and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        if not ip.is_global:
            raise ToolError(
                ErrorCode.BAD_REQUEST,
                f"private address: {ip.compressed} is not publicly routable, so it has no location",
            )
        key = ip.compressed
        cached = self.geo_cache.get(key)
        if cached is not None:
            return self._geo_content(cached, cached=True)
        doc = await self.get_json(
            "geolocation service",
            f"{self.settings.geo_api_url}/json/{key}",
            {"fields": "status,message,query,country,countryCode,regionName,city,lat,lon,timezone"},
        )
        parsed: _IpApiResponse = self._parse(_IpApiResponse, doc, "geolocation service")
        if parsed.status != "success":
            message = (parsed.message or "unknown failure")[:200]
            if message in ("private range", "reserved range"):
                raise ToolError(ErrorCode.BAD_REQUEST, f"private address: {key} ({message})")
            if message == "invalid query":
                raise ToolError(ErrorCode.BAD_REQUEST, f"geolocation service rejected {key!r}: invalid query")
            raise ToolError(ErrorCode.NOT_FOUND, f"no location for {key}: {message}")
        if parsed.lat is None or parsed.lon is None:
            raise ToolError(ErrorCode.UNAVAILABLE, "geolocation service returned a malformed response: no coordinates")
        location = {
            "ip": key,
            "country": parsed.country,
            "country_code": parsed.countryCode,
            "region": parsed.regionName,
            "city": parsed.city,
            "latitude": parsed.lat,
            "longitude": parsed.lon,
            "timezone": parsed.timezone,
        }
        self.geo_cache.put(key, location)
        return self._geo_content(location, cached=False)

    @staticmethod
    def _geo_content(location: dict[str, Any], *, cached: bool):
        place = (
            ", ".join(p for p in (location["city"], location["region"], location["country"]) if p) or "an unnamed place"
        )
        tz = f"; timezone {location['timezone']}" if location.get("timezone") else ""
        text = f"{location['ip']} is located in {place} ({_coord(location['latitude'])}, {_coord(location['longitude'])}{tz})."
        return [TextContent(text=text), DataContent(data={**location, "cached": cached})]

    async def weather_forecast(self, args: WeatherForecastArgs):
        lat, lon = round(args.latitude, 4), round(args.longitude, 4)
        doc = await self.get_json(
            "weather service",
            f"{self.settings.weather_api_url}/v1/forecast",
            {
                "latitude": lat,
                "longitude": lon,
                "current": "temperature_2m,wind_speed_10m,relative_humidity_2m,weather_code",
                "daily": "temperature_2m_max,temperature_2m_min,precipitation_sum",
                "timezone": "auto",
                "forecast_days": args.days,
            },
        )
        om: _OmResponse = self._parse(_OmResponse, doc, "weather service")
        cu, du = om.current_units, om.daily_units
        t_unit, w_unit = cu.get("temperature_2m", "°C"), cu.get("wind_speed_10m", "km/h")
        h_unit = cu.get("relative_humidity_2m", "%")
        cur = om.current
        condition = WMO_CODES.get(cur.weather_code) if cur.weather_code is not None else None
        days: list[dict[str, Any]] = []
        if om.daily is not None:
            d = om.daily
            n = len(d.time)
            for name in ("temperature_2m_max", "temperature_2m_min", "precipitation_sum"):
                if len(getattr(d, name)) not in (0, n):
                    raise ToolError(
                        ErrorCode.UNAVAILABLE, f"weather service returned a malformed response: daily.{name} length"
                    )

            def at(values: list[float | None], i: int) -> float | None:
                return values[i] if values else None

            days = [
                {
                    "date": d.time[i],
                    "temperature_2m_min": at(d.temperature_2m_min, i),
                    "temperature_2m_max": at(d.temperature_2m_max, i),
                    "precipitation_sum": at(d.precipitation_sum, i),
                }
                for i in range(n)
            ]
        now = ", ".join(
            part
            for part in (
                _fmt(cur.temperature_2m, t_unit),
                condition,
                f"wind {_fmt(cur.wind_speed_10m, w_unit)}",
                f"humidity {_fmt(cur.relative_humidity_2m, h_unit, 0)}",
            )
            if part
        )
        text = f"Current weather at {_coord(lat)},{_coord(lon)}: {now}"
        if days:
            dt, dp = du.get("temperature_2m_max", t_unit), du.get("precipitation_sum", "mm")
            forecast = "; ".join(
                f"{day['date']} {_fmt(day['temperature_2m_min'])} to {_fmt(day['temperature_2m_max'], dt)}, "
                f"{_fmt(day['precipitation_sum'], dp)} precipitation"
                for day in days
            )
            text += f"; next days: {forecast}"
        text += "."
        data = {
            "latitude": lat,
            "longitude": lon,
            "grid_latitude": om.latitude,
            "grid_longitude": om.longitude,
            "timezone": om.timezone,
            "elevation": om.elevation,
            "current": {
                "time": cur.time,
                "temperature_2m": cur.temperature_2m,
                "wind_speed_10m": cur.wind_speed_10m,
                "relative_humidity_2m": cur.relative_humidity_2m,
                "weather_code": cur.weather_code,
                "condition": condition,
            },
            "current_units": {
                k: cu[k] for k in ("temperature_2m", "wind_speed_10m", "relative_humidity_2m") if k in cu
            },
            "daily": days,
            "daily_units": {
                k: du[k] for k in ("temperature_2m_max", "temperature_2m_min", "precipitation_sum") if k in du
            },
        }
        return [TextContent(text=text), DataContent(data=data)]

    def tools(self) -> list[Tool]:
        timeout = self.tool_timeout_s()
        return [
            Tool(
                name="public_ip",
                description="Get the public IP address this assistant's deployment is seen from (no arguments).",
                args_model=PublicIpArgs,
                fn=self.public_ip,
                timeout_s=timeout,
                read_only=True,
            ),
            Tool(
                name="ip_geolocate",
                description="Look up the approximate location (city, region, country, latitude/longitude, timezone) of a public IP address.",
                args_model=IpGeolocateArgs,
                fn=self.ip_geolocate,
                timeout_s=timeout,
                read_only=True,
            ),
            Tool(
                name="weather_forecast",
                description="Current weather (temperature, wind, humidity, conditions) and a daily forecast (min/max temperature, precipitation) for a latitude/longitude.",
                args_model=WeatherForecastArgs,
                fn=self.weather_forecast,
                timeout_s=timeout,
                read_only=True,
            ),
        ]


def tools(settings: HttpApiSettings | None = None) -> list[Tool]:
    """The three tools over a fresh `HttpApis`; use `HttpApis(settings).tools()` directly to be able to `aclose()` it."""
    return HttpApis(settings).tools()
