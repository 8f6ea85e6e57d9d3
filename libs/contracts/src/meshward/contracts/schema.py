"""JSON Schema and AsyncAPI generated from the contracts.

    python -m meshward.contracts.schema          # check: exit 1 when the committed files drift
    python -m meshward.contracts.schema --write  # regenerate them
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .base import CONTRACTS_VERSION, Message
from .catalog import ENDPOINTS, ERROR_MODEL, EVENTS
from .subjects import EVENTS_STREAM

SCHEMA_DIR = Path(__file__).parent / "schemas"


def _models() -> dict[str, type[Message]]:
    models: dict[str, type[Message]] = {ERROR_MODEL.__name__: ERROR_MODEL}
    for ep in ENDPOINTS:
        models[ep.request.__name__] = ep.request
        models[ep.reply.__name__] = ep.reply
    for _, model in EVENTS:
        models[model.__name__] = model
    return dict(sorted(models.items()))


def asyncapi() -> dict:
    channels: dict = {}
    operations: dict = {}
    for ep in ENDPOINTS:
        key = ep.subject.replace(".", "_")
        channels[key] = {
            "address": ep.subject,
            "messages": {
                "request": {"$ref": f"#/components/messages/{ep.request.__name__}"},
                "reply": {"$ref": f"#/components/messages/{ep.reply.__name__}"},
                "error": {"$ref": f"#/components/messages/{ERROR_MODEL.__name__}"},
            },
        }
        operations[key] = {
            "action": "receive",
            "channel": {"$ref": f"#/channels/{key}"},
            "summary": ep.summary,
            "x-owner": ep.owner,
            "reply": {"channel": {"address": None}},
        }
    for subject, model in EVENTS:
        key = subject.replace(".", "_")
        channels[key] = {
            "address": subject,
            "x-jetstream-stream": EVENTS_STREAM,
            "messages": {"event": {"$ref": f"#/components/messages/{model.__name__}"}},
        }
        operations[key] = {"action": "send", "channel": {"$ref": f"#/channels/{key}"}}
    messages = {
        name: {"name": name, "contentType": "application/json", "payload": {"$ref": f"#/components/schemas/{name}"}}
        for name in _models()
    }
    return {
        "asyncapi": "3.0.0",
        "info": {"title": "meshward", "version": CONTRACTS_VERSION},
        "defaultContentType": "application/json",
        "channels": channels,
        "operations": operations,
        "components": {"messages": messages, "schemas": {n: m.model_json_schema() for n, m in _models().items()}},
    }


def rendered() -> dict[str, str]:
    """File name -> exact content, for every generated file."""
    files = {f"{name}.json": json.dumps(m.model_json_schema(), indent=2, sort_keys=True) + "\n" for name, m in _models().items()}
    files["asyncapi.json"] = json.dumps(asyncapi(), indent=2, sort_keys=True) + "\n"
    return files


def drift() -> list[str]:
    expected = rendered()
    problems = []
    for name, text in expected.items():
        path = SCHEMA_DIR / name
        if not path.exists():
            problems.append(f"missing {name}")
        elif path.read_text() != text:
            problems.append(f"changed {name}")
    for path in SCHEMA_DIR.glob("*.json"):
        if path.name not in expected:
            problems.append(f"stale {path.name}")
    return problems


def write() -> None:
    SCHEMA_DIR.mkdir(exist_ok=True)
    for path in SCHEMA_DIR.glob("*.json"):
        path.unlink()
    for name, text in rendered().items():
        (SCHEMA_DIR / name).write_text(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help="regenerate the committed schema files")
    args = parser.parse_args(argv)
    if args.write:
        write()
        print(f"wrote {len(rendered())} files to {SCHEMA_DIR}")
        return 0
    problems = drift()
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print("schemas drifted: run `python -m meshward.contracts.schema --write` and commit", file=sys.stderr)
        return 1
    print("schemas up to date")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
