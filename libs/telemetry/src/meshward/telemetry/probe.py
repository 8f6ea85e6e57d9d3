"""python -m meshward.telemetry.probe [livez|readyz]: the container health check (no curl in the images)."""
from __future__ import annotations

import os
import sys
import urllib.request


def main() -> int:
    path = sys.argv[1] if len(sys.argv) > 1 else "readyz"
    if path not in ("livez", "readyz"):
        print("usage: python -m meshward.telemetry.probe [livez|readyz]", file=sys.stderr)
        return 2
    port = os.environ.get("MESHWARD_METRICS_PORT", "9464")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/{path}", timeout=3) as reply:  # noqa: S310 - fixed local URL
            return 0 if reply.status == 200 else 1
    except OSError as e:
        print(f"{path}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
