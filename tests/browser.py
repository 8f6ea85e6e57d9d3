"""Headless Chromium for the web console's tests: Debian's `chromium` driven by Playwright.

Playwright's own browser download needs the internet, so the browser is the system's (scripts/install-chromium.sh,
`make chromium`) or the one MESHWARD_CHROMIUM names; without either the browser tests skip and say how to fix it."""
from __future__ import annotations

import os
import shutil

import pytest


def chromium_executable() -> str | None:
    for candidate in (os.environ.get("MESHWARD_CHROMIUM"), "chromium", "chromium-browser"):
        if candidate and (path := shutil.which(candidate)):
            return path
    return None


async def launch_chromium():
    """(playwright, browser), or a skip with the reason."""
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        pytest.skip("playwright is not installed: pip install -r requirements/dev.txt")
    executable = chromium_executable()
    if executable is None:
        pytest.skip("no Chromium: run `make chromium` (apt-gets Debian's chromium as root) or set MESHWARD_CHROMIUM to a Chromium binary")
    playwright = await async_playwright().start()
    try:
        browser = await playwright.chromium.launch(executable_path=executable)
    except Exception:
        await playwright.stop()
        raise
    return playwright, browser
