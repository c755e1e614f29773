"""``pylog consumer-groups`` on pylog's own groups and on a broker's __consumer_offsets."""

from __future__ import annotations

import shutil

from pylog.cli.main import main
from pylog.clients import Consumer, Producer
from tests.clients.conftest import make_topic
from tests.conftest import SAMPLES, needs_samples


def run(capsys, *argv) -> str:
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def test_describe_and_reset_offsets(root, capsys):
    make_topic(root, "events", 2)
    with Producer(root) as p:
        for i in range(20):
            p.send("events", b"%d" % i, partition=i % 2)
    with Consumer(root, "g1", auto_offset_reset="earliest", enable_auto_commit=False) as c:
        c.subscribe(["events"])
        while sum(c.position(tp) for tp in c.assignment()) < 20 or not c.assignment():
            c.poll(1000)
        c.commit()
    assert run(capsys, "consumer-groups", root, "--list").split() == ["g1"]
    lines = run(capsys, "consumer-groups", root, "--describe", "--group", "g1").splitlines()
    assert "has no active members" in lines[1]
    assert lines[3].split()[:6] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"]
    assert [ln.split()[:6] for ln in lines[4:]] == [["g1", "events", str(p), "10", "10", "0"] for p in (0, 1)]
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
    assert lines[4].split()[:6] == ["GroupA", "foo", "0", "204", "204", "0"]


@needs_samples
def test_multi_segment_sample_groups_are_gone_after_its_tombstones(tmp_path, capsys):
    shutil.copytree(SAMPLES / "real/multi-segment-0", tmp_path / "__consumer_offsets-7")
    assert run(capsys, "consumer-groups", str(tmp_path), "--list") == ""
