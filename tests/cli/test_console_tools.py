"""``pylog console-producer`` and ``pylog console-consumer`` (and their short names ``produce``
and ``consume``): Kafka's options and output, run through the real ``pylog`` console script."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time

import pytest

from pylog import Log, LogDirNotFoundError, LogManager, Record
from pylog.clients import Producer
from tests.log.test_tailing_readers import _line_queue, _next_line
from tests.waiting import wait_until

PYLOG = shutil.which("pylog")
pytestmark = pytest.mark.skipif(PYLOG is None, reason="the pylog console script is not installed (pip install -e .)")
#: Deadline for what includes starting a process (imports on a busy machine).
START_S = 60


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": os.getcwd()}


def console(*args, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    """``pylog ARGS`` through the installed console script, importing this checkout."""
    return subprocess.run([PYLOG, *map(str, args)], input=stdin, capture_output=True, env=_env(), timeout=120)


def ok(*args, stdin: bytes | None = None) -> str:
    r = console(*args, stdin=stdin)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout.decode()


def one_line_error(*args, stdin: bytes | None = None) -> str:
    r = console(*args, stdin=stdin)
    err = r.stderr.decode()
    assert r.returncode == 1 and "Traceback" not in err and err.count("\n") == 1, err
    return err


def _records(root, topic, partition=0) -> list:
    with LogManager(root, read_only=True) as m:
        return list(m.log(topic, partition).records())


# -- the producer -----------------------------------------------------------------------------------

def test_console_producer_piped_from_a_slow_writer_each_line_is_consumed_within_a_second(tmp_path):
    """A writer writes a line and waits until a console-consumer printed it, then the next:
    no line waits for a batch to fill."""
    root = tmp_path / "root"
    ok("topics", root, "--create", "--topic", "t", "--partitions", "2")
    consumer = subprocess.Popen([PYLOG, "console-consumer", root, "--topic", "t", "--from-beginning"],
                                stdout=subprocess.PIPE, env=_env())
    producer = subprocess.Popen([PYLOG, "console-producer", root, "--topic", "t"], stdin=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, env=_env())
    printed = _line_queue(consumer.stdout)
    waits = []
    try:
        for i in range(8):
            producer.stdin.write(b"line-%d\n" % i)
            producer.stdin.flush()
            written = time.monotonic()
            line = _next_line(printed, written + (START_S if i == 0 else 1.0),
                              f"line {i} was not consumed within {'a second' if i else 'the start-up deadline'}")
            waits.append(time.monotonic() - written)
            assert line == f"line-{i}"
    finally:
        producer.kill()
        consumer.kill()
        producer.wait()
        consumer.wait()
    assert max(waits[1:]) < 1.0, waits
    assert {r.value for p in (0, 1) for r in _records(root, "t", p)} == {b"line-%d" % i for i in range(8)}


def test_keys_headers_and_nulls_are_parsed_as_kafkas_line_reader_does(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    lines = b"h1:a,h2:NULL\tk1|v1\nNULL\tNULL|v2\nh3:c\tk3|NULL\n"
    ok("console-producer", root, "--topic", "t", "--property", "parse.key=true", "key.separator=|",
       "parse.headers=true", "null.marker=NULL", stdin=lines)
    got = [(r.headers, r.key, r.value) for r in _records(root, "t")]
    assert got == [((("h1", b"a"), ("h2", None)), b"k1", b"v1"), ((), None, b"v2"), ((("h3", b"c"),), b"k3", None)]


def test_a_line_without_its_separator_is_a_one_line_error_after_the_lines_before_it(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    err = one_line_error("console-producer", root, "--topic", "t", "--property", "parse.key=true",
                         stdin=b"k1\tv1\nno separator here\nk3\tv3\n")
    assert "no key separator '\\t' on line 2: 'no separator here'" in err
    assert [(r.key, r.value) for r in _records(root, "t")] == [(b"k1", b"v1")]
    ok("console-producer", root, "--topic", "t", "--property", "parse.key=true", "ignore.error=true",
       stdin=b"plain\n")
    assert [(r.key, r.value) for r in _records(root, "t")][-1] == (None, b"plain")


def test_a_line_too_large_for_the_topic_is_a_one_line_error_and_the_lines_around_it_go_in(tmp_path):
    root = tmp_path / "root"
    ok("topics", root, "--create", "--topic", "small", "--config", "max.message.bytes=100")
    err = one_line_error("console-producer", root, "--topic", "small", stdin=b"short\n" + b"x" * 500 + b"\nafter\n")
    assert "exceeds max_message_bytes 100" in err
    assert [r.value for r in _records(root, "small")] == [b"short", b"after"]


def test_two_console_producers_write_one_topic_at_the_same_time(tmp_path):
    """A console producer is a client like any other: while one runs (holding the partition
    it wrote), a second one started meanwhile writes too, and every line lands once."""
    root = tmp_path / "root"
    ok("topics", root, "--create", "--topic", "t")
    first = subprocess.Popen([PYLOG, "console-producer", root, "--topic", "t"], stdin=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=_env())
    try:
        first.stdin.write(b"first-0\n")
        first.stdin.flush()
        wait_until(lambda: len(_records(root, "t")) == 1, "the first producer's line", START_S)
        ok("console-producer", root, "--topic", "t", stdin=b"second-0\nsecond-1\n")
        first.stdin.write(b"first-1\n")
        first.stdin.close()
        assert first.wait(START_S) == 0, first.stderr.read().decode()
    finally:
        first.kill()
        first.wait()
    assert [r.value for r in _records(root, "t")] == [b"first-0", b"second-0", b"second-1", b"first-1"]


def test_verbose_names_the_offsets_written_and_the_old_produce_options_still_work(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    out = ok("produce", root, "--topic", "t", "--partitions", "3", "--key-separator", ":", "--compression",
             "gzip", "--verbose", stdin=b"".join(b"k%d:v%d\n" % (i, i) for i in range(9)))
    written = out.split()
    assert len(written) == 9 and len(set(written)) == 9
    for place in written:
        topic_partition, offset = place.split("@")
        partition = int(topic_partition.rpartition("-")[2])
        record = next(r for r in _records(root, "t", partition) if r.offset == int(offset))
        assert record.key.decode() in [f"k{i}" for i in range(9)]
    with LogManager(root, read_only=True) as m:
        assert {b.compression for p in range(3) for b in m.log("t", p).read(0).batches()} == {"gzip"}


def test_round_robin_and_a_fixed_partition(tmp_path):
    root = tmp_path / "root"
    ok("topics", root, "--create", "--topic", "t", "--partitions", "3")
    ok("console-producer", root, "--topic", "t", "--partitioner", "round-robin", stdin=b"a\nb\nc\nd\ne\nf\n")
    assert [len(_records(root, "t", p)) for p in range(3)] == [2, 2, 2]
    ok("console-producer", root, "--topic", "t", "--partition", "1", stdin=b"x\ny\n")
    assert [r.value for r in _records(root, "t", 1)][-2:] == [b"x", b"y"]


def _tree(root) -> dict:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_console_producer_refuses_a_log_dir_that_does_not_exist_naming_the_command_that_creates_it(tmp_path):
    err = one_line_error("console-producer", tmp_path / "typo", "--topic", "t", stdin=b"a\n")
    assert f"no log dir at {tmp_path / 'typo'}" in err and "pylog topics" in err, err
    assert not (tmp_path / "typo").exists()


@pytest.mark.parametrize("args, stdin, message", [
    (["--topic", "t", "--partition", "9"], b"a\n", "topic 't' has no partition 9"),
    (["--topic", "new", "--partition", "1"], b"a\n", "topic 'new' has no partition 1"),
    (["--topic", "t", "--property", "parse.key=true"], b"no-separator\n", "no key separator"),
    (["--topic", "new", "--partitions", "-2"], b"a\n", "--partitions must be at least 1, got -2"),
])
def test_a_failing_console_producer_changes_nothing(tmp_path, args, stdin, message):
    """Nothing is appended, no topic created, no producer id taken from the log dir's file."""
    root = tmp_path / "root"
    with LogManager(root) as m:
        m.create_topic("t", 1)
    with Producer(str(root)) as producer:
        producer.send("t", b"v").get()
    before = _tree(root)
    assert message in one_line_error("console-producer", root, *args, stdin=stdin)
    assert _tree(root) == before


def test_a_property_list_ends_before_the_log_dir_given_last(tmp_path):
    """``--property a=b c=d ROOT``, the order of the usage line: ROOT is not a property."""
    root = tmp_path / "root"
    ok("topics", root, "--create", "--topic", "t")
    ok("console-producer", "--topic", "t", "--property", "parse.key=true", "key.separator=:", root, stdin=b"k:v\n")
    assert [(r.key, r.value) for r in _records(root, "t")] == [(b"k", b"v")]
    assert ok("consume", "--topic", "t", "--property", "print.key=true", "print.offset=true", root) == \
        "Offset:0\tk\tv\n"


def test_kafka_producer_settings_set_the_options_they_stand_for_and_others_are_refused(tmp_path):
    """--producer-property / --command-property and --producer.config / --command-config,
    as Kafka tutorials give them: a setting with a use here is that option."""
    root = tmp_path / "root"
    ok("topics", root, "--create", "--topic", "t")
    config = tmp_path / "producer.properties"
    config.write_text("# as Kafka's config/producer.properties\ncompression.type=gzip\n")
    ok("console-producer", root, "--topic", "t", "--producer.config", config, "--producer-property", "acks=all",
       "--command-property", "linger.ms=0", stdin=b"a\n")
    with LogManager(root, read_only=True) as m:
        assert [b.compression for b in m.log("t", 0).read(0).batches()] == ["gzip"]
    before = _tree(root)
    config.write_text("bootstrap.servers=localhost:9092\n")
    assert f"{config}:1: bootstrap.servers is a setting for reaching a cluster" in \
        one_line_error("console-producer", root, "--topic", "t", "--command-config", config, stdin=b"a\n")
    assert "batch.size has no use here" in \
        one_line_error("console-producer", root, "--topic", "t", "--producer-property", "batch.size=16384")
    assert _tree(root) == before


# -- the consumer -----------------------------------------------------------------------------------

@pytest.fixture
def topic(tmp_path):
    """A two-partition topic: keyed records with headers in partition 0, one binary value in 1."""
    root = tmp_path / "root"
    with LogManager(root) as m:
        t = m.create_topic("t", 2)
        t.append([Record(b"v0", key=b"k0", timestamp=1700000000000, headers=(("h", b"x"), ("n", None))),
                  Record(b"v1", key=None, timestamp=1700000000001)], partition=0)
        t.append([Record(b"\xff\xfe", key=b"bin", timestamp=1700000000002)], partition=1)
    return root


def test_print_properties_give_kafkas_lines(topic):
    props = ["--property", "print.timestamp=true", "print.partition=true", "print.offset=true", "print.key=true",
             "print.headers=true"]
    out = console("consume", topic, "--topic", "t", *props).stdout
    assert out.split(b"\n") == [b"CreateTime:1700000000000\tPartition:0\tOffset:0\th:x,n:null\tk0\tv0",
                                b"CreateTime:1700000000001\tPartition:0\tOffset:1\tNO_HEADERS\tnull\tv1",
                                b"CreateTime:1700000000002\tPartition:1\tOffset:0\tNO_HEADERS\tbin\t\xff\xfe", b""]
    assert console("console-consumer", topic, "--topic", "t", "--from-beginning", "--no-follow", *props).stdout == out
    assert ok("consume", topic, "--topic", "t", "--property", "print.key=true", "key.separator=|",
              "print.value=false", "--partition", "0") == "k0\nnull\n"


def test_json_output_says_which_values_are_text_and_which_base64(topic):
    rows = [json.loads(line) for line in ok("consume", topic, "--topic", "t", "--formatter", "json").splitlines()]
    assert rows[0] == {"topic": "t", "partition": 0, "offset": 0, "timestamp": 1700000000000,
                       "timestamp_type": "CreateTime", "key": "k0", "key_encoding": "utf-8", "value": "v0",
                       "value_encoding": "utf-8", "headers": [
                           {"key": "h", "value": "x", "value_encoding": "utf-8"},
                           {"key": "n", "value": None, "value_encoding": None}]}
    assert (rows[1]["key"], rows[1]["key_encoding"]) == (None, None)
    assert (rows[2]["value"], rows[2]["value_encoding"]) == ("//4=", "base64")


def test_start_options_and_limits(topic):
    assert ok("consume", topic, "--topic", "t", "--partition", "0", "--offset", "1") == "v1\n"
    assert console("consume", topic, "--topic", "t", "--timestamp", "1700000000001").stdout == b"v1\n\xff\xfe\n"
    assert ok("consume", topic, "--topic", "t", "--partition", "0", "--timestamp", "1700000000001") == "v1\n"
    r = console("console-consumer", topic, "--topic", "t", "--from-beginning", "--max-messages", "2")
    assert r.returncode == 0 and r.stdout == b"v0\nv1\n"
    assert r.stderr.decode().splitlines()[-1] == "Processed a total of 2 messages"
    r = console("console-consumer", topic, "--topic", "t", "--from-beginning", "--no-follow", "--max-messages", "-1")
    assert r.stdout.count(b"\n") == 3  # -1: no limit, Kafka's default
    started = time.monotonic()
    r = console("console-consumer", topic, "--topic", "t", "--timeout-ms", "300")  # at the end: nothing new
    assert r.returncode == 0 and r.stdout == b"" and time.monotonic() - started >= 0.3
    err = one_line_error("console-consumer", topic, "--topic", "t", "--offset", "0")
    assert "--offset needs --partition" in err


def test_read_committed_leaves_out_aborted_and_open_transactions(tmp_path):
    root = tmp_path / "root"
    with Log.open(root / "t-0") as log:
        log.append([b"plain"])
        log.append([b"aborted"], producer_id=1, producer_epoch=0, base_sequence=0, is_transactional=True)
        log.append_txn_marker(1, 0, commit=False)
        log.append([b"committed"], producer_id=2, producer_epoch=0, base_sequence=0, is_transactional=True)
        log.append_txn_marker(2, 0, commit=True)
        log.append([b"open"], producer_id=3, producer_epoch=0, base_sequence=0, is_transactional=True)
        assert ok("consume", root, "--topic", "t", "--isolation-level", "read_committed").split() == \
            ["plain", "committed"]
        assert ok("consume", root, "--topic", "t", "--isolation", "committed").split() == ["plain", "committed"]
        assert ok("consume", root, "--topic", "t").split() == ["plain", "aborted", "committed", "open"]


@pytest.mark.parametrize("args", [
    ["console-consumer", "/nonexistent", "--topic", "t"],
    ["consume", "{root}", "--topic", "missing"],
    ["console-consumer", "{root}", "--topic", "missing", "--no-follow"],
    ["console-consumer", "{root}", "--topic", "t", "--partition", "5"],
    ["consume", "{root}", "--topic", "t", "--partition", "0", "--offset", "99"],
    ["console-consumer", "{root}", "--topic", "t", "--property", "print.everything=true"],
    ["console-producer", "{root}", "--topic", "t", "--property", "parse.key"],
    ["console-producer", "{root}", "--topic", "bad/name"],
    ["consume", "{root}", "--include", "nothing-matches"],
    ["consume", "{root}", "--include", "t("],
    ["consume", "{root}", "--include", "t", "--partition", "0"],
    ["console-consumer", "{root}", "--topic", "t", "--max-messages", "-5"],
    ["console-consumer", "{root}", "--topic", "t", "--timeout-ms", "-5"],
])
def test_mistakes_are_one_line_errors(topic, args):
    one_line_error(*[a.replace("{root}", str(topic)) for a in args], stdin=b"x\n")


def test_kafka_consumer_options_from_tutorials_mean_what_they_can_here(topic):
    """Kafka's class names of the formatter and deserializers whose output pylog prints,
    --skip-message-on-error, --formatter-property and consumer settings are accepted with
    that meaning; what has none here is refused saying why."""
    config = topic.parent / "consumer.properties"
    config.write_text("isolation.level=read_committed\n")
    printed = console("console-consumer", topic, "--topic", "t", "--no-follow", "--consumer-property",
                      "auto.offset.reset=earliest", "--consumer.config", config, "--formatter",
                      "kafka.tools.DefaultMessageFormatter", "--formatter-property", "print.key=true",
                      "--key-deserializer", "org.apache.kafka.common.serialization.StringDeserializer",
                      "--value-deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer",
                      "--skip-message-on-error")
    assert printed.returncode == 0 and b"bin\t\xff\xfe\n" in printed.stdout, printed.stderr
    assert printed.stdout == console("consume", topic, "--topic", "t", "--property", "print.key=true").stdout
    for option, value, why in (("--formatter", "kafka.tools.LoggingMessageFormatter", "the formatters are"),
                               ("--value-deserializer", "org.apache.kafka.common.serialization.LongDeserializer",
                                "printed as their bytes")):
        r = console("consume", topic, "--topic", "t", option, value)
        assert r.returncode == 2 and why in r.stderr.decode() and r.stderr.count(b"\n") == 1, r.stderr
    assert "fetch.min.bytes has no use here" in one_line_error("consume", topic, "--topic", "t",
                                                               "--consumer-property", "fetch.min.bytes=1")


def test_a_missing_log_dir_is_a_pylog_error(tmp_path):
    with pytest.raises(LogDirNotFoundError, match="no log dir at"):
        LogManager.open_existing(str(tmp_path / "missing"), read_only=True)


# -- in a consumer group ------------------------------------------------------------------------------

def test_a_group_consumer_starts_at_its_committed_offsets_and_shows_in_consumer_groups(tmp_path):
    """``--group``: the first run reads everything (``--from-beginning`` with no committed
    offsets), commits on exit; the next run of the same group prints only what came since,
    and ``consumer-groups --describe`` shows no lag."""
    root = tmp_path / "root"
    ok("topics", root, "--create", "--topic", "t", "--partitions", "2")
    ok("produce", root, "--topic", "t", stdin=b"".join(b"a%d\n" % i for i in range(10)))
    first = ok("console-consumer", root, "--topic", "t", "--group", "g", "--from-beginning", "--no-follow")
    assert sorted(first.split()) == sorted(f"a{i}" for i in range(10))
    ok("produce", root, "--topic", "t", stdin=b"b0\nb1\nb2\n")
    second = ok("console-consumer", root, "--topic", "t", "--group", "g", "--from-beginning", "--no-follow")
    assert sorted(second.split()) == ["b0", "b1", "b2"]
    described = ok("consumer-groups", root, "--describe", "--group", "g")
    lags = [line.split()[5] for line in described.splitlines() if line.startswith("g ")]
    assert lags == ["0", "0"], described


def test_include_reads_every_matching_topic_but_the_internal_ones_alone_or_in_a_group(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    for name, lines in (("orders", b"o1\no2\n"), ("orders-eu", b"e1\n"), ("audit", b"a1\n")):
        ok("produce", root, "--topic", name, stdin=lines)
    ok("console-consumer", root, "--topic", "orders", "--group", "g", "--from-beginning", "--no-follow")
    assert "__consumer_offsets-0" in {p.name for p in root.iterdir()}
    assert sorted(ok("consume", root, "--include", "orders.*|__.*").split()) == ["e1", "o1", "o2"]
    grouped = ok("console-consumer", root, "--include", "orders.*", "--group", "h", "--from-beginning",
                 "--no-follow")
    assert sorted(grouped.split()) == ["e1", "o1", "o2"]
    described = ok("consumer-groups", root, "--describe", "--group", "h")
    assert sorted(line.split()[1] for line in described.splitlines() if line.startswith("h ")) == \
        ["orders", "orders-eu"]


def test_group_does_not_go_with_a_partition_or_an_offset(topic):
    assert "--group" in one_line_error("console-consumer", topic, "--topic", "t", "--group", "g", "--partition", "0")


# -- topics that come and go ----------------------------------------------------------------------------

def _following(*args) -> tuple[subprocess.Popen, object, object]:
    """A ``pylog console-consumer`` running with ``args``; its stdout and stderr lines as queues."""
    process = subprocess.Popen([PYLOG, "console-consumer", *map(str, args)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=_env())
    return process, _line_queue(process.stdout), _line_queue(process.stderr)


def _until_line(lines, wanted, what: str) -> list[str]:
    """The lines of ``lines`` up to the first for which ``wanted(line)`` is true."""
    seen, deadline = [], time.monotonic() + START_S
    while not seen or not wanted(seen[-1]):
        line = _next_line(lines, deadline, f"{what}; got {seen}")
        assert line is not None, f"the process ended before {what}; got {seen}"
        seen.append(line)
    return seen


def _create_and_see(root, topic: str, value: str, out) -> None:
    """Create ``topic``, write ``value`` to it, and see the consumer print it next."""
    ok("topics", root, "--create", "--topic", topic)
    ok("console-producer", root, "--topic", topic, stdin=value.encode() + b"\n")
    assert _until_line(out, lambda line: line == value, f"{value!r} of the new topic {topic}") == [value]


def _stop(process) -> int:
    process.send_signal(signal.SIGINT)
    try:
        return process.wait(START_S)
    finally:
        process.kill()
        process.wait()


def test_console_consumer_waits_for_a_topic_that_does_not_exist_yet(tmp_path):
    """As Kafka's console consumer waits on an unknown topic: it says so once, then prints
    what the topic gets once it is created, all of it (everything in it is new)."""
    root = tmp_path / "root"
    ok("topics", root, "--create", "--topic", "other")
    process, out, err = _following(root, "--topic", "later")
    try:
        _until_line(err, lambda line: "'later' does not exist" in line, "the consumer's note that it waits")
        _create_and_see(root, "later", "first", out)
    finally:
        assert _stop(process) == 130
    rest = [line for line in iter(err.get, None)]
    assert rest == ["Processed a total of 1 messages"], rest


@pytest.mark.parametrize("group", [[], ["--group", "g"]], ids=["assigned", "in-a-group"])
def test_console_consumer_goes_on_when_its_topic_is_deleted_under_it_and_reads_it_again(tmp_path, group):
    """Deleting the topic a console consumer follows: no OS error, a note on stderr, and it
    keeps polling, reading the topic of that name created afterwards from its start."""
    root = tmp_path / "root"
    ok("topics", root, "--create", "--topic", "t", "--partitions", "2")
    ok("console-producer", root, "--topic", "t", "--partition", "1", stdin=b"before\n")
    process, out, err = _following(root, "--topic", "t", "--from-beginning", *group)
    try:
        _until_line(out, lambda line: line == "before", "the record written before")
        ok("topics", root, "--delete", "--topic", "t")
        noted = _until_line(err, lambda line: "was deleted" in line, "the consumer's note that t went")
        assert all("Errno" not in line for line in noted), noted
        _create_and_see(root, "t", "after", out)
    finally:
        assert _stop(process) == 130
    rest = [line for line in iter(err.get, None)]
    assert all("Errno" not in line and "Traceback" not in line for line in rest), rest
    assert rest[-1] == "Processed a total of 2 messages"
