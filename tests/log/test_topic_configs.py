"""``topic-configs.json``: every writer (a ``LogManager`` in any process, ``pylog configs
--alter``, a client creating an internal topic) changes it under one cross-process lock,
reading it again first, so no update is lost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from pylog import LogManager
from tests.waiting import wait_until

WRITES_PER_PROCESS = 15

# Each writer builds its LogManager (reading topic-configs.json) before the others write,
# then waits for the go (its stdin closed): a writer that wrote its stale copy back would drop theirs.
_WRITER = textwrap.dedent("""
    import os, sys
    from pylog import LogManager
    from pylog.cli.configs import alter
    root, kind, me = sys.argv[1], sys.argv[2], int(sys.argv[3])
    manager = LogManager(root)
    open(os.path.join(root, f"ready-{kind}-{me}"), "w").close()
    sys.stdin.read()  # the go: the test closes every writer's stdin at once
    for j in range(%d):
        if kind == "set":      # its own topic, whole
            manager.set_topic_config(f"own-{me}", {"segment_bytes": 100_000 + j})
        elif kind == "alter":  # one key of the shared topic, as kafka-configs.sh --alter does
            alter(root, "shared", {f"{('retention.ms', 'retention.bytes')[me]}": str(1000 + j)}, [])
        else:                  # one key of the shared topic, through the manager
            manager.alter_topic_config("shared", {("flush_ms", "flush_messages")[me]: 5000 + j})
    manager.close()
""" % WRITES_PER_PROCESS)


def _run_writers(root, kinds: list[tuple[str, int]]) -> None:
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(root), kind, str(me)], stdin=subprocess.PIPE)
             for kind, me in kinds]
    try:
        wait_until(lambda: all(os.path.exists(root / f"ready-{k}-{m}") for k, m in kinds)
                   or any(p.poll() for p in procs), "every writer to be ready", timeout_s=120)
        for p in procs:
            p.stdin.close()
        for p in procs:
            assert p.wait(timeout=300) == 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()


def test_managers_in_several_processes_keep_each_others_topic_settings(tmp_path):
    _run_writers(tmp_path, [("set", me) for me in range(4)])
    saved = json.loads((tmp_path / "topic-configs.json").read_text())
    assert saved == {f"own-{me}": {"segment_bytes": 100_000 + WRITES_PER_PROCESS - 1} for me in range(4)}


def test_managers_and_configs_alter_in_several_processes_lose_no_key(tmp_path):
    with LogManager(tmp_path) as m:
        m.create_topic("shared", 1)
    _run_writers(tmp_path, [("alter", 0), ("alter", 1), ("manager-alter", 0), ("manager-alter", 1),
                            ("set", 0)])
    last = WRITES_PER_PROCESS - 1
    with LogManager(tmp_path, read_only=True) as m:
        assert m.topic_overrides("shared") == {"retention_ms": 1000 + last, "retention_bytes": 1000 + last,
                                               "flush_ms": 5000 + last, "flush_messages": 5000 + last}
        assert m.topic_overrides("own-0") == {"segment_bytes": 100_000 + last}


def test_a_manager_sees_settings_another_process_wrote_since_it_opened(tmp_path):
    with LogManager(tmp_path) as early:
        _run_writers(tmp_path, [("set", 0)])
        early.set_topic_config("mine", {"segment_bytes": 4096})
        assert early.topic_config("own-0").segment_bytes == 100_000 + WRITES_PER_PROCESS - 1
    saved = json.loads((tmp_path / "topic-configs.json").read_text())
    assert set(saved) == {"own-0", "mine"}


def test_alter_topic_config_sets_and_removes_keys_checked_before_writing(tmp_path):
    import pytest
    from pylog import InvalidConfigError
    with LogManager(tmp_path) as m:
        m.set_topic_config("t", {"segment_bytes": 4096, "flush_ms": 10})
        m.alter_topic_config("t", {"retention_ms": 5}, remove=["flush_ms"])
        assert m.topic_overrides("t") == {"segment_bytes": 4096, "retention_ms": 5}
        before = (tmp_path / "topic-configs.json").read_bytes()
        with pytest.raises(InvalidConfigError, match="cleanup_policy"):
            m.alter_topic_config("t", {"cleanup_policy": "sometimes"})
        with pytest.raises(InvalidConfigError, match="no_such_setting"):
            m.alter_topic_config("t", remove=["no_such_setting"])
        assert (tmp_path / "topic-configs.json").read_bytes() == before


def test_settings_given_to_consumer_offsets_before_its_first_use_are_kept(tmp_path):
    from pylog.clients import Consumer, Producer, TopicPartition
    declared = {"cleanup_policy": "compact", "segment_bytes": 4096, "retention_check_interval_ms": 200}
    with LogManager(tmp_path) as m:
        m.create_topic("t", 1)
        m.set_topic_config("__consumer_offsets", declared)
    with Producer(str(tmp_path)) as producer:
        producer.send("t", b"v").get(30)
    consumer = Consumer(str(tmp_path), "g", enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        consumer.assign([TopicPartition("t", 0)])
        consumer.poll(timeout_ms=500)
        consumer.commit()
    finally:
        consumer.close()
    assert os.path.isdir(tmp_path / "__consumer_offsets-0")  # the client created it
    with LogManager(tmp_path, read_only=True) as m:
        assert m.topic_overrides("__consumer_offsets") == declared


def test_an_internal_topic_is_created_compacted_keeping_other_settings(tmp_path):
    from pylog.coordinator.txn_coordinator import ensure_internal_topic
    with LogManager(tmp_path) as m:
        m.set_topic_config("__transaction_state", {"cleanup_policy": "delete", "segment_bytes": 4096})
    ensure_internal_topic(str(tmp_path), "__transaction_state", 3)
    with LogManager(tmp_path, read_only=True) as m:
        assert m.topic_overrides("__transaction_state") == {"cleanup_policy": "compact", "segment_bytes": 4096}
        assert m.partitions("__transaction_state") == [0, 1, 2]
