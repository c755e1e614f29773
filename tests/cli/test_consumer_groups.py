"""``pylog consumer-groups``: what Kafka's tool warns about and refuses, run through the
command's ``main``; refused input changes nothing on disk."""

from __future__ import annotations

import hashlib

from pylog import LogManager
from pylog.cli.main import main
from pylog.coordinator.group_coordinator import GroupCoordinator

#: what kafka-consumer-groups.sh 4.3.1 prints on stderr for --reset-offsets without --dry-run or --execute
NO_EXECUTE_WARNING = ("WARN: No action will be performed as the --execute option is missing. In version 5.0, this "
                      "command will require either --dry-run or --execute to be specified. You should add the "
                      "--dry-run option explicitly if you are scripting this command and want to keep the current "
                      "default behavior without prompting.\n")


def _tree(root) -> dict:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and p.name != ".lock"}


def _group(root, group: str = "g") -> None:
    with LogManager(root) as m:
        m.create_topic("t", 2).append([b"a", b"b", b"c"], partition=0)
    coordinator = GroupCoordinator.for_root(str(root))
    try:
        coordinator.commit_offsets(group, {("t", 0): 2})
    finally:
        coordinator.release()


def test_reset_offsets_without_dry_run_or_execute_warns_as_kafka_and_changes_nothing(tmp_path, capsys):
    root = tmp_path / "root"
    _group(root)
    before = _tree(root)
    assert main(["consumer-groups", str(root), "--reset-offsets", "--group", "g", "--topic", "t",
                 "--to-earliest"]) == 0
    out, err = capsys.readouterr()
    assert err == NO_EXECUTE_WARNING
    assert out.split()[-4:] == ["g", "t", "1", "0"]
    assert _tree(root) == before


def test_reset_offsets_with_dry_run_does_not_warn(tmp_path, capsys):
    root = tmp_path / "root"
    _group(root)
    assert main(["consumer-groups", str(root), "--reset-offsets", "--group", "g", "--topic", "t",
                 "--to-earliest", "--dry-run"]) == 0
    assert capsys.readouterr().err == ""


def test_delete_offsets_of_a_group_that_does_not_exist_fails_as_kafka_and_changes_nothing(tmp_path, capsys):
    root = tmp_path / "root"
    _group(root)
    before = _tree(root)
    assert main(["consumer-groups", str(root), "--delete-offsets", "--group", "no-such-group", "--topic", "t"]) == 1
    out = capsys.readouterr().out
    assert "Successful" not in out
    assert out.splitlines()[:2] == ["", "Error: 'no-such-group' does not exist."]
    assert _tree(root) == before


def test_describe_of_a_group_that_does_not_exist_says_so_as_kafka_and_exits_1(tmp_path, capsys):
    root = tmp_path / "root"
    _group(root)
    for view in ([], ["--members"], ["--state"]):
        assert main(["consumer-groups", str(root), "--describe", "--group", "nope", *view]) == 1
        assert capsys.readouterr().out == "Error: Consumer group 'nope' does not exist.\n"
    assert main(["consumer-groups", str(root), "--describe", "--group", "g", "--state"]) == 0


def test_describe_prints_the_groups_sorted_by_id_as_kafka_does(tmp_path, capsys):
    """Kafka's tool collects the groups in a map sorted by id: the order on the command line
    does not matter, and a group named twice is described once."""
    root = tmp_path / "root"
    for group in ("b-group", "a-group"):
        _group(root, group)
    alone = {}
    for group in ("a-group", "b-group"):
        assert main(["consumer-groups", str(root), "--describe", "--group", group]) == 0
        alone[group] = capsys.readouterr().out
    assert main(["consumer-groups", str(root), "--describe", "--group", "b-group", "--group", "a-group",
                 "--group", "b-group"]) == 0
    assert capsys.readouterr().out == alone["a-group"] + alone["b-group"]
