"""``pylog consumer-groups`` on pylog's own groups and on a broker's __consumer_offsets."""

from __future__ import annotations

import shutil

import pytest

from pylog.cli.main import main
from pylog.clients import Consumer, Producer
from tests.clients.conftest import make_topic
from tests.conftest import SAMPLES, needs_samples
from tests.waiting import poll_until


def run(capsys, *argv) -> str:
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def run_with_stderr(capsys, *argv) -> tuple[str, str]:
    assert main(list(argv)) == 0
    got = capsys.readouterr()
    return got.out, got.err


def test_describe_and_reset_offsets(root, capsys):
    make_topic(root, "events", 2)
    with Producer(root) as p:
        for i in range(20):
            p.send("events", b"%d" % i, partition=i % 2)
    with Consumer(root, "g1", auto_offset_reset="earliest", enable_auto_commit=False) as c:
        c.subscribe(["events"])
        poll_until(c, lambda: c.assignment() and sum(c.position(tp) for tp in c.assignment()) == 20,
                   "all 20 records read")
        c.commit()
    assert run(capsys, "consumer-groups", root, "--list").split() == ["g1"]
    out, err = run_with_stderr(capsys, "consumer-groups", root, "--describe", "--group", "g1")
    assert err == "\nConsumer group 'g1' has no active members.\n"  # on stderr, as Kafka's tool says it
    lines = out.splitlines()
    assert lines[0] == "" and lines[1].split()[:6] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET",
                                                       "LOG-END-OFFSET", "LAG"]
    assert [ln.split()[:6] for ln in lines[2:]] == [["g1", "events", str(p), "10", "10", "0"] for p in (0, 1)]
    run(capsys, "consumer-groups", root, "--reset-offsets", "--group", "g1", "--topic", "events:0", "--to-offset",
        "4", "--dry-run")
    with Consumer(root, "g1") as c:
        assert c.committed(("events", 0)) == 10  # a dry run changes nothing
    out = run(capsys, "consumer-groups", root, "--reset-offsets", "--group", "g1", "--topic", "events",
              "--to-earliest", "--execute")
    assert [ln.split() for ln in out.splitlines()[2:]] == [["g1", "events", "0", "0"], ["g1", "events", "1", "0"]]
    with Consumer(root, "g1") as c:
        assert c.committed(("events", 0)) == 0 and c.committed(("events", 1)) == 0


@needs_samples
def test_a_brokers_consumer_offsets_are_listed_and_described(tmp_path, capsys):
    shutil.copytree(SAMPLES / "real/legacy-magic1-logdir", tmp_path / "d")
    root = str(tmp_path / "d")
    assert run(capsys, "consumer-groups", root, "--list").split() == ["GroupA"]
    lines = run(capsys, "consumer-groups", root, "--describe", "--group", "GroupA").splitlines()
    assert lines[2].split()[:6] == ["GroupA", "foo", "0", "204", "204", "0"]


@needs_samples
def test_multi_segment_sample_groups_are_gone_after_its_tombstones(tmp_path, capsys):
    shutil.copytree(SAMPLES / "real/multi-segment-0", tmp_path / "__consumer_offsets-7")
    assert run(capsys, "consumer-groups", str(tmp_path), "--list") == ""


def fails(capsys, *argv) -> str:
    """Runs a command expected to fail; returns its output (stdout and stderr)."""
    from pylog.errors import PylogError
    try:
        code = main(list(argv))
    except PylogError as e:
        code, extra = 1, str(e)
    else:
        extra = ""
    assert code != 0
    captured = capsys.readouterr()
    return captured.out + captured.err + extra


def _committed_group(root, group="g", partitions=3, records=5):
    make_topic(root, "t", partitions, [(p, [b"%d" % i for i in range(records)]) for p in range(partitions)])
    with Consumer(root, group, auto_offset_reset="earliest", enable_auto_commit=False) as c:
        c.subscribe(["t"])
        poll_until(c, lambda: c.assignment() and sum(c.position(tp) for tp in c.assignment()) == partitions * records,
                   "every record read")
        c.commit()


def _table(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line.strip()]


def test_describe_members_and_state_of_a_live_group_and_of_an_empty_one(root, capsys):
    make_topic(root, "t", 3)
    with Consumer(root, "g", client_id="worker-1") as c:
        c.subscribe(["t"])
        poll_until(c, c.assignment, "an assignment")
        members = _table(run(capsys, "consumer-groups", root, "--describe", "--group", "g", "--members", "--verbose"))
        assert members[0] == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]
        assert members[1][0] == "g" and members[1][3:] == ["worker-1", "3", "t(0,1,2)"]
        state = _table(run(capsys, "consumer-groups", root, "--describe", "--group", "g", "--state"))
        assert state[1][0] == "g" and state[1][-3:] == ["range", "Stable", "1"]
    out, err = run_with_stderr(capsys, "consumer-groups", root, "--describe", "--group", "g", "--members")
    assert out == "" and "Consumer group 'g' has no active members." in err
    assert _table(run(capsys, "consumer-groups", root, "--describe", "--group", "g", "--state"))[1][-3:] == \
        ["-", "Empty", "0"]


def test_delete_offsets_refuses_a_topic_live_members_read_then_deletes_after_they_left(root, capsys):
    _committed_group(root)
    with Consumer(root, "g") as c:
        c.subscribe(["t"])
        poll_until(c, c.assignment, "an assignment")
        out = fails(capsys, "consumer-groups", root, "--delete-offsets", "--group", "g", "--topic", "t:0")
        assert "subscribed to 't'" in out
        assert c.committed(("t", 0)) == 5
    out = run(capsys, "consumer-groups", root, "--delete-offsets", "--group", "g", "--topic", "t:0,2")
    assert _table(out)[-2:] == [["t", "0", "Successful"], ["t", "2", "Successful"]]
    with Consumer(root, "g") as c:
        assert [c.committed(("t", p)) for p in range(3)] == [None, 5, None]


def test_reset_offsets_export_then_from_file_and_by_duration(root, capsys, tmp_path):
    _committed_group(root, "a")
    run(capsys, "consumer-groups", root, "--reset-offsets", "--group", "b", "--topic", "t", "--to-offset", "2",
        "--execute")
    plan = run(capsys, "consumer-groups", root, "--reset-offsets", "--group", "a", "--group", "b", "--all-topics",
               "--shift-by", "-2", "--export")
    assert plan.splitlines() == [f"{g},t,{p},{o}" for g, o in (("a", 3), ("b", 0)) for p in range(3)]
    (tmp_path / "plan.csv").write_text(plan)
    run(capsys, "consumer-groups", root, "--reset-offsets", "--group", "a", "--group", "b",
        "--from-file", str(tmp_path / "plan.csv"), "--execute")
    with Consumer(root, "a") as c:
        assert [c.committed(("t", p)) for p in range(3)] == [3, 3, 3]
    # every record is younger than a day: a day back is the log start, a day ahead the end
    back = run(capsys, "consumer-groups", root, "--reset-offsets", "--group", "a", "--topic", "t:1",
               "--by-duration", "P1D", "--export")
    ahead = run(capsys, "consumer-groups", root, "--reset-offsets", "--group", "a", "--topic", "t:1",
                "--by-duration=-P1D", "--export")
    assert (back, ahead) == ("t,1,0\n", "t,1,5\n")


@pytest.mark.parametrize("argv, says", [
    (["--reset-offsets", "--group", "g", "--topic", "t:x", "--to-latest", "--execute"], "TOPIC:0,1"),
    (["--reset-offsets", "--group", "g", "--topic", "t:7", "--to-latest", "--execute"], "no partition 7"),
    (["--reset-offsets", "--group", "g", "--all-topics", "--by-duration", "30m", "--execute"], "PnDTnHnMnS"),
    (["--reset-offsets", "--group", "g", "--from-file", "/nonexistent.csv", "--execute"], "/nonexistent.csv"),
    (["--describe", "--group", "g", "--export"], "--export goes only with --reset-offsets"),
    (["--list", "--members"], "--members goes only with --describe"),
    (["--delete-offsets", "--group", "g"], "--topic"),
    (["--delete", "--group", "nobody"], "'nobody' could not be deleted"),
])
def test_bad_consumer_groups_commands_say_what_and_change_nothing(root, capsys, argv, says):
    _committed_group(root)
    out = fails(capsys, "consumer-groups", root, *argv)
    assert says in out
    with Consumer(root, "g") as c:
        assert [c.committed(("t", p)) for p in range(3)] == [5, 5, 5]


def test_describe_columns_are_as_wide_as_their_longest_value_as_kafka_sizes_them(root, capsys):
    name = "a-topic-with-a-rather-long-name"
    make_topic(root, name, 1)
    with Consumer(root, "a-group-with-a-long-name", client_id="w") as c:
        c.subscribe([name])
        poll_until(c, c.assignment, "an assignment")
        lines = run(capsys, "consumer-groups", root, "--describe", "--group", "a-group-with-a-long-name").splitlines()
        header, row = lines[1], lines[2]
        assert header.index("TOPIC") == len("a-group-with-a-long-name") + 1
        assert header.index("PARTITION") == row.index(" 0 ") + 1 == header.index("TOPIC") + len(name) + 1
        member = row.split()[6]
        assert header.index("HOST") == header.index("CONSUMER-ID") + len(member) + 1
