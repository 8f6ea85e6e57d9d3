#!/usr/bin/env bash
# Debian's Chromium for the console's browser tests (tests/e2e/test_console_browser.py; `make chromium`).
# Playwright drives it through MESHWARD_CHROMIUM or the first of chromium / chromium-browser on PATH: its own
# browser download needs the internet. Installs with apt-get when run as root and none is found; otherwise
# says what to do and exits 0, and the browser tests skip with that reason.
set -euo pipefail
for candidate in "${MESHWARD_CHROMIUM:-}" chromium chromium-browser; do
    if [[ -n $candidate ]] && command -v "$candidate" >/dev/null 2>&1; then
        echo "chromium: $(command -v "$candidate") ($("$candidate" --version 2>/dev/null || echo 'version unknown'))"
        exit 0
    fi
done
if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
    echo "no Chromium found and cannot apt-get it here: install Debian's 'chromium' package (as root:" \
         "apt-get install chromium) or set MESHWARD_CHROMIUM; the browser tests skip until then" >&2
    exit 0
fi
echo "installing Debian's chromium (apt-get)"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
echo "chromium: $(command -v chromium) ($(chromium --version))"
