"""The command line itself: ``pylog --version``, help text on every option, and the ways
``pylog dump`` takes its files and decodes payloads."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys

import pytest

import pylog as pylog_package
from pylog import Log, Record
from pylog.cli.main import COMMANDS, build_parser
from tests.cli.test_cli import pylog


def test_version_names_pylog_the_speedups_python_and_the_spark_reader():
    r = pylog("--version")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.decode().splitlines()
    assert lines[0] == f"pylog {pylog_package.__version__}"
    assert lines[1] == f"C speedups: {'on' if pylog_package.SPEEDUPS else 'off'}"
    assert re.match(r"Python 3\.\d+\.\d+ ", lines[2])
    assert re.match(r"Spark JVM reader: (on \(/.*\.jar\)|built on first use|off \()", lines[3]), lines[3]


def test_every_option_of_every_command_has_help_text():
    parser = build_parser()
    missing = [(None, a.dest) for a in parser._actions if a.help is None]
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    for name, sub in commands.items():
        missing += [(name, a.option_strings or a.dest) for a in sub._actions if not a.help]
    assert missing == []


def _command_help_lines(parser) -> dict:
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {action.dest: action.help for action in commands._choices_actions}


def test_pylog_help_lists_each_command_with_the_line_its_own_parser_gives_without_loading_it():
    every = _command_help_lines(build_parser())
    assert list(every) == list(COMMANDS)
    assert _command_help_lines(build_parser(load=())) == every == {n: h for n, (_, h) in COMMANDS.items()}
    r = pylog("--help")
    assert r.returncode == 0 and all(name in r.stdout.decode() for name in COMMANDS), r.stderr


def test_pylog_command_loads_that_command_s_module_only():
    probe = ("import json, sys\nfrom pylog.cli.main import main\ntry:\n    main(['describe', '--help'])\n"
             "except SystemExit:\n    pass\n"
             "print(json.dumps(sorted(m for m in sys.modules if m.startswith('pylog.cli.'))))")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    loaded = json.loads(r.stdout.strip().splitlines()[-1])
    assert "pylog.cli.describe" in loaded
    assert not {"pylog.cli.perf", "pylog.cli.dump", "pylog.cli.topics"} & set(loaded), loaded


@pytest.mark.parametrize("option", ["--bootstrap-server", "--broker-list", "--bootstrap-server=localhost:9092"])
def test_a_kafka_cluster_option_is_answered_with_what_to_give_instead(tmp_path, option):
    argv = [option] if "=" in option else [option, "localhost:9092"]
    r = pylog("topics", *argv, "--list")
    err = r.stderr.decode()
    assert r.returncode == 2 and "log dir, not a cluster" in err and option.split("=")[0] in err, err


def test_console_producer_takes_kafka_s_acks_option(tmp_path):
    r = pylog("console-producer", str(tmp_path), "--topic", "t", "--request-required-acks", "all", stdin=b"a\n")
    assert r.returncode == 0, r.stderr
    with Log.open(tmp_path / "t-0", read_only=True) as log:
        assert [x.value for x in log.records()] == [b"a"]


def _segment(tmp_path):
    with Log.open(tmp_path / "v-0") as log:
        log.append([Record(b'{"a": 1,  "b": [1, 2]}', key=b"k"), Record(b"plain \xff")])
    return tmp_path / "v-0" / "00000000000000000000.log"


def test_dump_takes_files_as_arguments_as_well_as_with_files(tmp_path):
    seg = _segment(tmp_path)
    index = seg.with_suffix(".timeindex")
    positional = pylog("dump", seg, index)
    assert positional.returncode == 0, positional.stderr
    assert positional.stdout == pylog("dump", "--files", f"{seg},{index}").stdout
    assert positional.stdout.decode().splitlines()[0] == f"Dumping {seg}"


def test_dump_without_files_is_a_one_line_error():
    r = pylog("dump")
    assert r.returncode != 0 and r.stderr.decode().count("\n") == 1 and "no files to dump" in r.stderr.decode()


def _payloads(out: bytes) -> list[str]:
    return re.findall(r"payload: (.*)$", out.decode(), re.M)


def test_value_decoders_print_payloads_as_text_json_or_hex(tmp_path):
    seg = _segment(tmp_path)
    assert _payloads(pylog("dump", seg, "--print-data-log").stdout) == ['{"a": 1,  "b": [1, 2]}', "plain \ufffd"]
    assert _payloads(pylog("dump", seg, "--value-decoder", "utf8").stdout) == \
        _payloads(pylog("dump", seg, "--print-data-log").stdout)
    assert _payloads(pylog("dump", seg, "--value-decoder", "json").stdout) == ['{"a":1,"b":[1,2]}', "plain \ufffd"]
    assert _payloads(pylog("dump", seg, "--value-decoder", "hex").stdout) == \
        [b'{"a": 1,  "b": [1, 2]}'.hex(), b"plain \xff".hex()]
    out = pylog("dump", seg, "--value-decoder", "hex").stdout.decode()
    assert " key: k payload: " in out  # keys stay text, as with Kafka's default key decoder
