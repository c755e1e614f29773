"""``LogDirMetadata``: the one owner of a log dir's topics and ``topic-configs.json``.
Processes changing settings at once lose none of each other's changes; each process sees
the partitions and settings another one made, without being told."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from pylog.errors import InvalidConfigError, UnknownTopicError
from pylog.logdir.metadata import LogDirMetadata
from tests.waiting import wait_until

WRITES = 25

# Each writer reads the settings first (a copy it could write back stale), then waits for the
# go (its stdin closed) and changes its own key WRITES times.
_WRITER = textwrap.dedent("""
    import os, sys
    from pylog.logdir.metadata import LogDirMetadata
    root, how, me = sys.argv[1], sys.argv[2], int(sys.argv[3])
    metadata = LogDirMetadata.for_root(root)
    metadata.all_overrides()
    open(os.path.join(root, f"ready-{me}"), "w").close()
    sys.stdin.read()
    for j in range(%d):
        if how == "topics":  # a topic of its own, whole
            metadata.set_topic_config(f"own-{me}", {"segment_bytes": 100_000 + j})
        else:                # one field of a shared topic
            metadata.alter_topic_config("shared", {("retention_ms", "flush_ms", "flush_messages")[me]: 1000 + j})
""" % WRITES)


def _run_writers(root, how: str, count: int) -> None:
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(root), how, str(me)], stdin=subprocess.PIPE)
             for me in range(count)]
    try:
        wait_until(lambda: all((root / f"ready-{me}").exists() for me in range(count))
                   or any(p.poll() is not None for p in procs), "every writer to be ready", timeout_s=120)
        for p in procs:
            p.stdin.close()
        assert [p.wait(timeout=300) for p in procs] == [0] * count
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()


def test_processes_setting_different_topics_at_once_keep_every_topic(tmp_path):
    _run_writers(tmp_path, "topics", 3)
    saved = json.loads((tmp_path / "topic-configs.json").read_text())
    assert saved == {f"own-{me}": {"segment_bytes": 100_000 + WRITES - 1} for me in range(3)}


def test_processes_altering_different_fields_of_one_topic_at_once_keep_every_field(tmp_path):
    _run_writers(tmp_path, "fields", 3)
    assert LogDirMetadata(str(tmp_path)).topic_overrides("shared") == {
        "retention_ms": 1000 + WRITES - 1, "flush_ms": 1000 + WRITES - 1, "flush_messages": 1000 + WRITES - 1}


def test_partitions_and_settings_another_process_made_are_seen_without_a_reopen(tmp_path):
    metadata = LogDirMetadata.for_root(str(tmp_path))
    assert metadata.topics() == [] and metadata.partition_count("t") == 0
    with pytest.raises(UnknownTopicError, match="'t'"):
        metadata.partitions("t")
    subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import sys
        from pylog.logdir.metadata import LogDirMetadata
        m = LogDirMetadata(sys.argv[1])
        m.create_partitions("t", 3)
        m.set_topic_config("t", {"segment_bytes": 4096})
    """), str(tmp_path)], check=True, timeout=60)
    assert metadata.topics() == ["t"] and metadata.partitions("t") == [0, 1, 2]
    assert metadata.topic_config("t").segment_bytes == 4096
    assert LogDirMetadata.for_root(str(tmp_path)) is metadata  # one per log dir and process


def test_directories_that_are_not_partitions_are_not_topics(tmp_path):
    for name in ("t-0", "t-1", "t-2.abc-delete", "notes", "u-x"):
        (tmp_path / name).mkdir()
    (tmp_path / "v-0").write_text("a file")
    assert LogDirMetadata(str(tmp_path)).partition_dirs() == {"t": [0, 1]}


def test_a_settings_file_that_does_not_parse_is_an_invalid_config_error_naming_it(tmp_path):
    (tmp_path / "topic-configs.json").write_text("[1, 2]")
    metadata = LogDirMetadata(str(tmp_path))
    with pytest.raises(InvalidConfigError, match="topic-configs.json does not hold"):
        metadata.topic_config("t")
    (tmp_path / "topic-configs.json").write_text('{"t": {"retention_ms": 5}}')
    assert metadata.topic_config("t").retention_ms == 5  # read again once fixed


def test_a_change_is_checked_before_the_file_is_written(tmp_path):
    metadata = LogDirMetadata(str(tmp_path))
    metadata.set_topic_config("t", {"segment_bytes": 4096})
    before = (tmp_path / "topic-configs.json").read_bytes()
    with pytest.raises(InvalidConfigError):
        metadata.set_topic_config("t", {"cleanup_policy": "sometimes"})
    with pytest.raises(InvalidConfigError, match="no_such_setting"):
        metadata.alter_topic_config("t", remove=["no_such_setting"])
    assert (tmp_path / "topic-configs.json").read_bytes() == before
    assert metadata.alter_topic_config("t", {"retention_ms": 5}, remove=["segment_bytes"]) == {"retention_ms": 5}
    assert metadata.update_topic_config("t", lambda current: None) == {}
    assert json.loads((tmp_path / "topic-configs.json").read_text()) == {}
    assert not os.path.exists(tmp_path / "t-0")  # settings alone make no partition
