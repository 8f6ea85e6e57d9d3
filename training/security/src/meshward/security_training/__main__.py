"""python -m meshward.security_training [--force] [--check] [--print-dir] [--quiet]"""
from __future__ import annotations

import argparse
import sys

from meshward.training import add_arguments, run_cli

from . import build_spec


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="meshward train security",
                                     description="build (or find in the cache) the security classifier")
    add_arguments(parser)
    return run_cli(build_spec(), parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
