"""Reading a Server-Sent Events body in tests: (event, JSON data) pairs in order."""
from __future__ import annotations

import json


def sse_events(text: str) -> list[tuple[str, dict]]:
    out = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        lines = block.splitlines()
        event = next((line[6:].strip() for line in lines if line.startswith("event:")), None)
        data = "\n".join(line[5:].strip() for line in lines if line.startswith("data:"))
        if event and data:
            out.append((event, json.loads(data)))
    return out
