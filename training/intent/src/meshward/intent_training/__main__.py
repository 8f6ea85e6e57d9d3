"""python -m meshward.intent_training [--scope FILE] [--force] [--check] [--print-dir] [--quiet]"""
from __future__ import annotations

import argparse
import os
import sys

from meshward.intent.scope import ScopeError
from meshward.training import add_arguments, run_cli

from . import build_spec


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="meshward train intent",
                                     description="build (or find in the cache) the intent classifier for a scope file")
    parser.add_argument("--scope", default=os.environ.get("MESHWARD_INTENT_SCOPE_FILE") or None,
                        help="scope YAML (default: $MESHWARD_INTENT_SCOPE_FILE, else the packaged datacenter.yaml)")
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        spec = build_spec(scope_file=args.scope)
    except ScopeError as exc:
        print(exc, file=sys.stderr)
        return 2
    return run_cli(spec, args)


if __name__ == "__main__":
    sys.exit(main())
