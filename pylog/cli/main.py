"""``pylog``: the command-line entry point. Each subcommand lives in its own module
with ``add_parser(subparsers)`` and ``run(args) -> int``.

Errors a user can cause (missing path, unknown topic, corrupt file, bad option) print
one line on stderr and exit non-zero; no traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from pylog.errors import PylogError

#: subcommand -> module under pylog.cli
COMMANDS = {
    "perf": "perf",
    "dump": "dump",
    "verify": "verify",
    "describe": "describe",
    "produce": "produce",
    "consume": "consume",
    "retention": "maintenance",
    "compact": "maintenance",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pylog", description="Kafka partition logs from the shell.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, module in COMMANDS.items():
        mod = importlib.import_module(f"pylog.cli.{module}")
        adder = getattr(mod, f"add_{name}_parser", None) or mod.add_parser
        adder(sub)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except BrokenPipeError:  # the reader (head, less) went away: not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (PylogError, OSError) as e:
        print(f"pylog {args.command}: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
