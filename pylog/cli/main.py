"""``pylog``: the command-line entry point. Each subcommand lives in its own module
with ``add_parser(subparsers)`` (or ``add_<command>_parser`` when a module holds several)
and ``run(args) -> int``; its help line is the one :data:`COMMANDS` holds.

Errors a user can cause (missing path, unknown topic, corrupt file, bad option) print
one line on stderr and exit non-zero; no traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

import pylog
from pylog.errors import PylogError

#: subcommand -> (module under pylog.cli, the line ``pylog --help`` shows for it), in the order
#: ``pylog --help`` lists them: Kafka's everyday tools first, then inspection, maintenance and
#: the benchmark. ``pylog COMMAND`` loads that command's module only (start-up time); the
#: module's parser gets its line from here (:class:`_Commands`).
COMMANDS = {
    "topics": ("topics", "create, list, describe, grow or delete topics, as kafka-topics.sh does"),
    "console-producer": ("console_producer", "append stdin lines as records, as kafka-console-producer.sh does"),
    "produce": ("console_producer", "the same as console-producer"),
    "console-consumer": ("console_consumer", "print the records of a topic as kafka-console-consumer.sh does, "
                                             "following new ones until --max-messages, --timeout-ms or Ctrl-C"),
    "consume": ("console_consumer", "console-consumer with --from-beginning --no-follow as defaults: print what a "
                                    "topic holds and stop"),
    "get-offsets": ("get_offsets", "print topic:partition:offset for a time, as kafka-get-offsets.sh does"),
    "delete-records": ("delete_records", "delete records below offsets, as kafka-delete-records.sh does"),
    "consumer-groups": ("consumer_groups", "list, describe and reset consumer groups (kafka-consumer-groups "
                                           "compatible)"),
    "transactions": ("transactions", "list, describe, find hanging and abort transactions, as kafka-transactions.sh "
                                     "does"),
    "configs": ("configs", "describe or alter a topic's settings, as kafka-configs.sh does"),
    "describe": ("describe", "partitions, offsets, sizes, timestamps and topic configs of a log dir or of one "
                             "partition directory"),
    "dump": ("dump", "print the batches, records and index entries of segment files (kafka-dump-log compatible)"),
    "verify": ("verify", "check CRCs, indexes, offsets and checkpoints; exit 0 only when clean"),
    "retention": ("maintenance", "apply the delete policy once to every log"),
    "compact": ("maintenance", "compact every log whose policy includes compact"),
    "serve": ("serve", "serve a log dir with Kafka's protocol, for Kafka's clients and tools"),
    "tiered": ("tiered", "tiered storage: restore tiered segments into partition directories"),
    "perf": ("perf", "produce then consume N records and report throughput and latency"),
}


class _Parser(argparse.ArgumentParser):
    """argparse's parser, saying a usage mistake in one line on stderr (exit 2), as every
    other mistake is said (docs/cli.md); ``--help`` still prints the usage."""

    def error(self, message: str):
        command = self.prog if self.prog != "pylog" else "pylog COMMAND"
        self.exit(2, f"{self.prog}: error: {message} ({command} --help lists the options)\n")


class _Commands:
    """The ``pylog`` subparsers as a command module sees them: ``add_parser(name, ...)``
    gives the command the help line :data:`COMMANDS` holds for it."""

    def __init__(self, subparsers):
        self._subparsers = subparsers

    def add_parser(self, name: str, **kwargs) -> argparse.ArgumentParser:
        return self._subparsers.add_parser(name, help=COMMANDS[name][1], **kwargs)


def build_parser(load=COMMANDS) -> argparse.ArgumentParser:
    """The ``pylog`` parser, with the full parsers of the commands named in ``load`` (all by
    default); the others are listed by name and help line only, their modules not loaded."""
    parser = _Parser(prog="pylog", description="Kafka partition logs from the shell.")
    parser.add_argument("--version", action=_VersionAction, nargs=0,
                        help="print pylog's version, whether the C speedups are on, and Python's version")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", help="one of these; pylog COMMAND --help "
                                                                        "lists its options")
    sub.required = True
    for name, (module, help_line) in COMMANDS.items():
        if name not in load:
            sub.add_parser(name, help=help_line)
            continue
        mod = importlib.import_module(f"pylog.cli.{module}")
        adder = getattr(mod, f"add_{name.replace('-', '_')}_parser", None) or mod.add_parser
        adder(_Commands(sub))
    parser.commands = sub.choices  # each command's parser, by name
    return parser


def version_text() -> str:
    """``pylog --version``: one line per fact a bug report needs."""
    import platform

    from pylog.spark.jvm import reader_lines

    return "\n".join([f"pylog {pylog.__version__}", f"C speedups: {'on' if pylog.SPEEDUPS else 'off'}",
                      f"Python {platform.python_version()} ({platform.python_implementation()}, {sys.platform})",
                      *reader_lines()])


class _VersionAction(argparse.Action):
    """Prints :func:`version_text` as it is (argparse's own version action rewraps lines)."""

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_text())
        parser.exit()


#: Kafka's options that name a cluster: pylog's commands take a log dir in their place
CLUSTER_OPTIONS = ("--bootstrap-server", "--broker-list", "--zookeeper", "--bootstrap-controller")


#: Kafka's options taking NAME=VALUE settings, several after one option (--property a=b c=d)
NAME_VALUE_LISTS = ("--property", "--reader-property", "--formatter-property")


def end_name_value_lists(argv: list[str]) -> list[str]:
    """``argv`` with each NAME=VALUE list ending at the first argument that is not one, so
    ``--property a=b c=d ROOT`` keeps ROOT (argparse gives a list every argument up to the
    next option): each value is written ``--property=a=b``, which argparse takes alone."""
    out, option, first = [], None, False
    for arg in argv:
        if option is not None and not arg.startswith("-") and (first or "=" in arg):
            out.append(f"{option}={arg}")
            first = False
            continue
        if first:  # the option without a value: argparse says so
            out.append(option)
        name = arg.split("=", 1)[0]
        option, first = (name, name == arg) if name in NAME_VALUE_LISTS else (None, False)
        if not first:
            out.append(arg)
    return out + ([option] if first else [])


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(load={command} & set(COMMANDS))
    given = next((a for a in argv if a.split("=", 1)[0] in CLUSTER_OPTIONS), None)
    if given is not None:
        parser.error(f"{given.split('=', 1)[0]}: pylog reads and writes a log dir, not a cluster; give the "
                     f"directory (a broker's log.dirs, or any directory for a new one) where Kafka's tools take "
                     f"{given.split('=', 1)[0]} HOST:PORT")
    args, unknown = parser.parse_known_args(end_name_value_lists(argv))
    if unknown:  # said by the command's parser, which names the command
        parser.commands[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
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
