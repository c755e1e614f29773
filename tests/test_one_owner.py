"""One owner per small fact: the int limits, the sequence modulus and the segment file
names live in pylog/layout.py, partition directory names in
``partition_dir.partition_dir_name``, the clock in ``record.encode.now_ms``; file locks, a
name's lock byte and the backoff of polling loops in pylog/locks.py; the topics' settings file
in pylog/logdir/metadata.py. A copy of one of them anywhere else in pylog/ fails here, naming
the file and line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PYLOG = Path(__file__).resolve().parent.parent / "pylog"

RULES = [
    ("an int limit (layout.INT32_MAX, INT64_MAX)", r"2 ?\*\* ?(31|63) ?- ?1|0x7fffffff", {"layout.py"}),
    ("the sequence modulus (layout.SEQUENCE_MODULUS)", r"% ?\(?2 ?\*\* ?31\b(?! ?-)", {"layout.py"}),
    ("the clock (record.encode.now_ms)", r"time\.time\(\) ?\* ?1000|time_ns\(\) ?// ?1_?000_?000\b",
     {"record/encode.py"}),
    ("a segment file name (layout.segment_file_name)", r":0?20d\}", set()),
    ("a file-kind suffix (layout.LOG_SUFFIX, ...)",
     r"""endswith\(["']\.(log|index|timeindex|txnindex|snapshot)["']\)""", set()),
    ("a partition directory's name (partition_dir.partition_dir_name)", r"""path\.join\(.*f["']\{[^}]+\}-\{""", set()),
    ("a topic's first partition directory (logdir.metadata.LogDirMetadata: does the topic exist?)",
     r"""f["']\{[^}]+\}-\d+["']""", set()),
    ("a file lock (locks.ByteLockFile, locks.DirMutex)", r"\bfcntl\.(flock|F_OFD_\w+|F_SETLKW?|F_GETLK|LOCK_EX)\b", {"locks.py"}),
    ("a name's lock byte (locks.name_byte)", r"""["']big["']\) ?>> ?2""", {"locks.py"}),
    ("a backoff that doubles its pause (locks.backoff)", r"(pause|delay)\w* ?\* ?2\b", {"locks.py"}),
    ("the topics' settings file name (layout.TOPIC_CONFIGS_FILE)", r"""["']topic-configs\.json["']""", {"layout.py"}),
    # the metadata reads and writes it; the writer pool watches it for changes; a log dir in
    # object storage holds a copy, read by the remote reader through metadata.parse_topic_configs
    ("the topics' settings file (logdir.metadata.LogDirMetadata)", r"\bTOPIC_CONFIGS_FILE\b",
     {"layout.py", "logdir/metadata.py", "logdir/writers.py", "remote/log_dir.py"}),
    ("a throwaway LogManager for a metadata lookup (logdir.metadata.LogDirMetadata)",
     r"LogManager\([^()]*\)\.(topics|partitions|topic_config|topic_overrides)\(", set()),
]


def sources():
    return sorted(p for p in PYLOG.rglob("*.py"))


@pytest.mark.parametrize("what, pattern, owners", RULES, ids=[r[0] for r in RULES])
def test_the_fact_is_written_only_by_its_owner(what, pattern, owners):
    found = []
    for path in sources():
        rel = path.relative_to(PYLOG).as_posix()
        if rel in owners:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if re.search(pattern, line):
                found.append(f"pylog/{rel}:{number}: {line.strip()}")
    assert not found, f"{what} written outside its owner:\n" + "\n".join(found)


def test_the_rules_find_what_they_look_for():
    samples = ["x = 2**31 - 1", "seq % 2**31", "int(time.time() * 1000)", 'f"{base:020d}.log"',
               'name.endswith(".log")', 'os.path.join(root, f"{topic}-{p}")',
               'os.path.isdir(os.path.join(root, f"{topic}-0"))', "fcntl.flock(fd, fcntl.LOCK_EX)",
               'int.from_bytes(digest, "big") >> 2', "pause = min(pause * 2, 0.005)",
               'os.path.join(root, "topic-configs.json")', "open(os.path.join(root, TOPIC_CONFIGS_FILE))",
               "LogManager(root, read_only=True).partitions(topic)"]
    for (what, pattern, _), sample in zip(RULES, samples):
        assert re.search(pattern, sample), what
