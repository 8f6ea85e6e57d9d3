"""The web console: one page and its ES modules, served from the package (no CDN, no build step).

The page is a client of the public HTTP API only (/v1/ask with SSE, /v1/threads/..., /healthz); this module
serves bytes and security headers, nothing else. The asset set is fixed when the module loads: a request names
one of those files or gets 404, so no path from a request ever reaches the file system."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources

from fastapi import APIRouter, Request, Response
from starlette.exceptions import HTTPException

# Scripts only from this origin and never inline; Trusted Types turn any HTML-string sink (innerHTML and
# friends) into an error, so model and tool text can only ever reach the page as text. Charts arrive as data:
# URLs; every API call goes to this origin.
CONTENT_SECURITY_POLICY = "; ".join((
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
    "require-trusted-types-for 'script'",
    "trusted-types 'none'",
))
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    # revalidated on every load (cheap with the ETag) so that an upgraded supervisor serves its own page
    "Cache-Control": "no-cache",
}
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}


@dataclass(frozen=True)
class Asset:
    body: bytes
    content_type: str
    etag: str


def load_assets() -> dict[str, Asset]:
    """Every file of the package's static/ folder with a known type, read once."""
    assets = {}
    for entry in (resources.files(__package__) / "static").iterdir():
        suffix = "." + entry.name.rsplit(".", 1)[-1] if "." in entry.name else ""
        if entry.is_file() and suffix in CONTENT_TYPES:
            body = entry.read_bytes()
            assets[entry.name] = Asset(body, CONTENT_TYPES[suffix], '"' + hashlib.sha256(body).hexdigest()[:32] + '"')
    if "index.html" not in assets:
        raise RuntimeError("the console's static/index.html is missing from the meshward-supervisor package; reinstall it")
    return assets


ASSETS = load_assets()
router = APIRouter(include_in_schema=False)


def _serve(asset: Asset, request: Request) -> Response:
    headers = {**SECURITY_HEADERS, "ETag": asset.etag}
    if asset.etag in {t.strip() for t in request.headers.get("if-none-match", "").split(",")}:
        return Response(status_code=304, headers=headers)
    return Response(asset.body, media_type=asset.content_type, headers=headers)


@router.api_route("/", methods=["GET", "HEAD"])
async def console_page(request: Request) -> Response:
    return _serve(ASSETS["index.html"], request)


@router.api_route("/console/{name}", methods=["GET", "HEAD"])
async def console_asset(request: Request, name: str) -> Response:
    asset = ASSETS.get(name)
    if asset is None or name == "index.html":  # the page itself lives at /
        raise HTTPException(404, f"no console asset {name}")
    return _serve(asset, request)
