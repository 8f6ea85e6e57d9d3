"""Loopback stand-ins for the public IP, geolocation and weather APIs, replaying their
documented response formats (ipify, ip-api.com, Open-Meteo). No internet in tests."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

PUBLIC_IP = "93.184.216.34"
IPIFY = {"ip": PUBLIC_IP}
IP_API = {
    "status": "success", "country": "Germany", "countryCode": "DE", "region": "HE", "regionName": "Hesse",
    "city": "Frankfurt am Main", "zip": "60313", "lat": 50.1109, "lon": 8.6821, "timezone": "Europe/Berlin",
    "isp": "Example", "org": "Example", "as": "AS15133", "query": PUBLIC_IP,
}
OPEN_METEO = {
    "latitude": 50.11, "longitude": 8.68, "generationtime_ms": 0.05, "utc_offset_seconds": 3600,
    "timezone": "Europe/Berlin", "timezone_abbreviation": "CET", "elevation": 112.0,
    "current_units": {"time": "iso8601", "interval": "seconds", "temperature_2m": "°C", "wind_speed_10m": "km/h",
                      "relative_humidity_2m": "%", "weather_code": "wmo code"},
    "current": {"time": "2026-11-22T10:00", "interval": 900, "temperature_2m": 7.4, "wind_speed_10m": 12.6,
                "relative_humidity_2m": 81, "weather_code": 3},
    "daily_units": {"time": "iso8601", "temperature_2m_max": "°C", "temperature_2m_min": "°C", "precipitation_sum": "mm"},
    "daily": {"time": ["2026-11-22", "2026-11-23", "2026-11-24"], "temperature_2m_max": [9.1, 8.4, 6.0],
              "temperature_2m_min": [3.2, 2.5, 1.1], "precipitation_sum": [0.4, 2.1, 0.0]},
}


class FakeUpstreams:
    def __init__(self) -> None:
        self.requests: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                outer.requests.append(self.path)
                url = urlparse(self.path)
                if url.path == "/" and parse_qs(url.query).get("format") == ["json"]:
                    body = IPIFY
                elif url.path.startswith("/json/"):
                    body = {**IP_API, "query": url.path.rsplit("/", 1)[-1]}
                elif url.path == "/v1/forecast":
                    body = OPEN_METEO
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def env(self) -> dict[str, str]:
        return {"MESHWARD_IP_API_URL": self.url, "MESHWARD_GEO_API_URL": self.url, "MESHWARD_WEATHER_API_URL": self.url}

    def __enter__(self) -> FakeUpstreams:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
