"""Every reader that says "latest" (the consumer, the Spark planner, the CLI tools) gives the
answer of ``Log.list_offset`` (tests/log/test_list_offset.py): the high watermark for
read_uncommitted, the last stable offset for read_committed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pylog import LogManager
from pylog.cli.console_consumer import assign
from pylog.cli.main import build_parser, main
from pylog.clients import Consumer
from pylog.spark.options import parse_read_options
from pylog.spark.plan import plan_ranges

TXN = dict(producer_epoch=0, is_transactional=True)


@pytest.fixture
def open_transaction(tmp_path):
    """A log dir whose topic ``t`` holds two records, then a transaction still open (offset 2)."""
    root = tmp_path / "root"
    with LogManager(root) as m:
        m.create_topic("t", 1)
        log = m.log("t", 0)
        log.append([b"a", b"b"])
        log.append([b"open"], producer_id=7, base_sequence=0, **TXN)
    return str(root)


@pytest.mark.parametrize("isolation, latest", [("read_uncommitted", 3), ("read_committed", 2)])
def test_every_reader_answers_latest_alike(open_transaction, isolation, latest, capsys):
    """The consumer, console-consumer ``--offset latest`` and its default start, the Spark
    planner; console-consumer used to answer the log end under read_committed too."""
    root = open_transaction
    answers = {}
    with Consumer(root, isolation_level=isolation) as consumer:
        answers["end_offsets"] = consumer.end_offsets([("t", 0)])[("t", 0)]
        consumer.assign([("t", 0)])
        answers["auto_offset_reset=latest"] = consumer.position(("t", 0))
        consumer.seek_to_beginning()
        consumer.seek_to_end()
        answers["seek_to_end"] = consumer.position(("t", 0))
    parser = build_parser()
    for name, argv in [("--offset latest", ["--partition", "0", "--offset", "latest"]), ("follow", [])]:
        args = parser.parse_args(["console-consumer", root, "--topic", "t", "--isolation-level", isolation, *argv])
        with LogManager(root, read_only=True) as m:
            answers[f"console-consumer {name}"] = [offset for offset in assign(m, args).values()][0]
    spark_plan = plan_ranges(parse_read_options({"path": root, "subscribe": "t", "isolationLevel": isolation}))
    answers["spark endingOffsets=latest"] = spark_plan[0].end
    assert answers == dict.fromkeys(answers, latest)


def test_the_cli_tools_answer_latest_as_read_uncommitted(open_transaction, capsys):
    """Kafka's get-offsets and consumer-groups list offsets read_uncommitted: the high watermark."""
    root = open_transaction
    assert main(["get-offsets", root, "--topic", "t", "--time", "latest"]) == 0
    assert capsys.readouterr().out == "t:0:3\n"
    with Consumer(root, group_id="g", auto_offset_reset="earliest") as consumer:
        consumer.subscribe(["t"])
        consumer.commit({("t", 0): 1})
    assert main(["consumer-groups", root, "--reset-offsets", "--group", "g", "--topic", "t", "--to-latest",
                 "--dry-run"]) == 0
    assert capsys.readouterr().out.split()[-4:] == ["g", "t", "0", "3"]


def test_no_other_module_chooses_latest_by_isolation():
    """``last_fetchable_offset`` (pylog/log/list_offset.py) is the one owner of the rule: a copy (``last_stable_offset if ...
    committed ... else``) anywhere else in pylog/ fails here, naming file and line."""
    pylog_dir = Path(__file__).resolve().parents[2] / "pylog"
    copies = [f"{path.relative_to(pylog_dir)}:{number}: {line.strip()}"
              for path in sorted(pylog_dir.rglob("*.py")) if path.relative_to(pylog_dir).as_posix() != "log/list_offset.py"
              for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
              if re.search(r"last_stable_offset if .*committed.* else", line)]
    assert copies == []
