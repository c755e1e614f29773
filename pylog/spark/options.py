"""Spark Kafka-source options, parsed and checked (docs/spark.md). Pure Python: no pyspark.

A bad option raises :class:`InvalidConfigError` naming it. Offsets JSON follows the Kafka
source: ``{"topic": {"0": 23, "1": -2}}`` with -2 = earliest and -1 = latest.

A log dir in object storage takes ``storage_options`` (JSON: fsspec's dict, as pandas and
pyarrow take it), else the S3A settings of Hadoop (options ``fs.s3a.*``, which the JVM side
fills from the session's ``spark.hadoop.fs.s3a.*``) translated to s3fs's options.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from pylog.errors import InvalidConfigError

EARLIEST, LATEST = -2, -1

_CANONICAL = ["path", "subscribe", "subscribePattern", "assign", "startingOffsets", "endingOffsets",
              "startingTimestamp", "endingTimestamp", "startingOffsetsByTimestamp", "endingOffsetsByTimestamp",
              "startingOffsetsByTimestampStrategy", "minPartitions", "maxRecordsPerPartition", "isolationLevel",
              "failOnDataLoss", "includeHeaders", "maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay",
              "groupId", "commitOffsetsToGroup", "topic", "partitions", "reader", "storage_options", "remote_storage"]
#: option names as users write them (Spark hands them over lower-cased)
DISPLAY = {name.lower(): name for name in _CANONICAL}


def _name(key: str) -> str:
    return DISPLAY.get(key, key)


KNOWN = {
    "path", "subscribe", "subscribepattern", "assign", "startingoffsets", "endingoffsets",
    "startingtimestamp", "endingtimestamp", "startingoffsetsbytimestamp", "endingoffsetsbytimestamp",
    "startingoffsetsbytimestampstrategy", "minpartitions", "maxrecordsperpartition", "isolationlevel",
    "kafka.isolation.level", "failondataloss", "includeheaders", "maxoffsetspertrigger", "minoffsetspertrigger",
    "maxtriggerdelay", "groupid", "commitoffsetstogroup", "topic", "partitions", "pushdown", "reader",
    "storage_options", "remote_storage",
}
#: option names taken as Hadoop settings (as Spark's file sources take them)
HADOOP_PREFIX = "fs."
#: values of option ``reader``: which implementation reads a batch query (docs/spark.md)
READERS = ("auto", "jvm", "python")
#: ``startingOffsets="group"``: a stream starts at the committed offsets of option ``groupId``
GROUP = "group"
#: Spark's default ``maxTriggerDelay`` (15m)
MAX_TRIGGER_DELAY_MS = 15 * 60_000
#: the units of a duration option, in ms (Spark's ``timeStringAsMs``; no unit is ms)
_DURATION_MS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "mins": 60_000, "h": 3_600_000,
                "d": 86_400_000}


@dataclass(frozen=True)
class ReadOptions:
    root: str
    subscribe: tuple | None = None
    pattern: str | None = None
    assign: dict | None = None
    starting: object = "earliest"
    ending: object = "latest"
    starting_timestamp: int | None = None
    ending_timestamp: int | None = None
    starting_by_timestamp: dict | None = None
    ending_by_timestamp: dict | None = None
    timestamp_strategy: str = "error"
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    isolation: str = "uncommitted"
    fail_on_data_loss: bool = True
    include_headers: bool = False
    max_offsets_per_trigger: int | None = None
    #: streaming: skip a trigger with fewer new offsets, unless ``max_trigger_delay_ms`` passed
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = MAX_TRIGGER_DELAY_MS
    #: the group whose committed offsets ``startingOffsets="group"`` starts from
    group_id: str | None = None
    #: streaming: the group whose committed offsets each committed micro-batch's end becomes
    commit_offsets_to_group: str | None = None
    reader: str = "auto"
    #: Kafka's consumer setting (option ``kafka.exclude.internal.topics``): the default (all
    #: topics) and ``subscribePattern`` leave Kafka's internal topics out
    exclude_internal_topics: bool = True
    #: fsspec's options for a log dir in object storage (never shown: it may hold credentials)
    storage_options: dict | None = field(default=None, repr=False, compare=False)
    #: where the tiered segments of a local log dir's topics are (``LogManager(root, remote_storage=url)``)
    remote_storage: str | None = None


def parse_read_options(options: dict, *, streaming: bool = False) -> ReadOptions:
    opts = {k.lower(): v for k, v in options.items()}
    unknown = sorted(k for k in opts if k not in KNOWN and not k.startswith(("kafka.", HADOOP_PREFIX)))
    if unknown:
        raise InvalidConfigError(f"unknown option(s) for format pylog: {', '.join(unknown)} "
                                 f"(known: {', '.join(_CANONICAL)})")
    root = opts.get("path")
    if not root:
        raise InvalidConfigError("no log dir: use .load(root) or .option('path', root)")
    chosen = [k for k in ("subscribe", "subscribepattern", "assign") if k in opts]
    if len(chosen) > 1:
        raise InvalidConfigError(f"options {', '.join(chosen)} exclude each other: give only one")
    subscribe = pattern = assign = None
    if "subscribe" in opts:
        subscribe = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip())
        if not subscribe:
            raise InvalidConfigError("option subscribe names no topic")
    elif "subscribepattern" in opts:
        pattern = opts["subscribepattern"]
        try:
            re.compile(pattern)
        except re.error as e:
            raise InvalidConfigError(f"option subscribePattern is not a valid regular expression: {e}") from None
    elif "assign" in opts:
        assign = _json_option(opts, "assign")
        if not isinstance(assign, dict) or not all(isinstance(v, list) and all(isinstance(p, int) for p in v)
                                                   for v in assign.values()):
            raise InvalidConfigError('option assign must be JSON like {"topicA":[0,1],"topicB":[2]}')
    isolation = opts.get("isolationlevel", opts.get("kafka.isolation.level", "read_uncommitted"))
    if isolation not in ("read_uncommitted", "read_committed"):
        raise InvalidConfigError(f"option isolationLevel must be read_uncommitted or read_committed, got {isolation!r}")
    starting = _offsets_option(opts, "startingoffsets", "latest" if streaming else "earliest", allow_latest=True)
    if not streaming and starting in ("latest", GROUP):
        raise InvalidConfigError(f"option startingOffsets={starting} is for streaming queries only")
    if not streaming and "commitoffsetstogroup" in opts:
        raise InvalidConfigError("option commitOffsetsToGroup is for streaming queries only (a batch query commits "
                                 "no offsets)")
    group_id = opts.get("groupid") or None
    if starting == GROUP and group_id is None:
        raise InvalidConfigError('option startingOffsets="group" needs option groupId: the group whose committed '
                                 'offsets the stream starts from')
    ending = _offsets_option(opts, "endingoffsets", "latest", allow_latest=True)
    if streaming and "endingoffsets" in opts:
        raise InvalidConfigError("option endingOffsets is not valid in streaming queries")
    if ending == "earliest":
        raise InvalidConfigError("option endingOffsets=earliest is not valid: a batch query would read nothing "
                                 "(use latest or JSON offsets)")
    if isinstance(ending, dict) and any(v == EARLIEST for parts in ending.values() for v in parts.values()):
        raise InvalidConfigError("option endingOffsets cannot use -2 (earliest)")
    reader = opts.get("reader", "auto").lower()
    if reader not in READERS:
        raise InvalidConfigError(f"option reader must be one of {', '.join(READERS)}, got {opts['reader']!r}")
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").lower()
    if strategy not in ("error", "latest"):
        raise InvalidConfigError("option startingOffsetsByTimestampStrategy must be error or latest")
    return ReadOptions(
        root=root, subscribe=subscribe, pattern=pattern, assign=assign, starting=starting, ending=ending,
        starting_timestamp=_int_option(opts, "startingtimestamp", minimum=0),
        ending_timestamp=_int_option(opts, "endingtimestamp", minimum=0),
        starting_by_timestamp=_partition_map(opts, "startingoffsetsbytimestamp"),
        ending_by_timestamp=_partition_map(opts, "endingoffsetsbytimestamp"),
        timestamp_strategy=strategy,
        min_partitions=_int_option(opts, "minpartitions", minimum=1),
        max_records_per_partition=_int_option(opts, "maxrecordsperpartition", minimum=1),
        isolation="committed" if isolation == "read_committed" else "uncommitted",
        fail_on_data_loss=_bool_option(opts, "failondataloss", True),
        include_headers=_bool_option(opts, "includeheaders", False),
        max_offsets_per_trigger=_int_option(opts, "maxoffsetspertrigger", minimum=1),
        min_offsets_per_trigger=_int_option(opts, "minoffsetspertrigger", minimum=1),
        max_trigger_delay_ms=_duration_ms_option(opts, "maxtriggerdelay", MAX_TRIGGER_DELAY_MS),
        group_id=group_id,
        commit_offsets_to_group=opts.get("commitoffsetstogroup") or None,
        reader=reader,
        exclude_internal_topics=_bool_option(opts, "kafka.exclude.internal.topics", True),
        storage_options=storage_options(opts),
        remote_storage=opts.get("remote_storage") or None,
    )


def storage_options(opts: dict) -> dict | None:
    """fsspec's options for the log dir: option ``storage_options`` (a JSON object), else the
    Hadoop S3A settings among the options translated by :func:`s3a_storage_options`, else
    None (the filesystem's defaults: its environment, instance profile, ...)."""
    if "storage_options" in opts:
        value = _json_option(opts, "storage_options")
        if not isinstance(value, dict):
            raise InvalidConfigError("option storage_options must be a JSON object such as "
                                     '{"key": "...", "secret": "...", "client_kwargs": {"endpoint_url": "..."}}')
        return value
    return s3a_storage_options({k: v for k, v in opts.items() if k.startswith(HADOOP_PREFIX)}) or None


#: Hadoop S3A settings and the s3fs options they become
_S3A_CREDENTIALS = {"fs.s3a.access.key": "key", "fs.s3a.secret.key": "secret", "fs.s3a.session.token": "token"}


def s3a_storage_options(hadoop: dict) -> dict:
    """s3fs's ``storage_options`` for Hadoop's S3A settings (keys lower-cased): credentials,
    ``fs.s3a.endpoint`` (``http://`` when ``fs.s3a.connection.ssl.enabled`` is false, as S3A
    reads a bare host), ``fs.s3a.endpoint.region``, ``fs.s3a.path.style.access`` and an
    anonymous credentials provider. Empty when none is set. Pure."""
    out = {name: hadoop[k] for k, name in _S3A_CREDENTIALS.items() if hadoop.get(k)}
    client = {}
    endpoint = hadoop.get("fs.s3a.endpoint")
    if endpoint:
        ssl = str(hadoop.get("fs.s3a.connection.ssl.enabled", "true")).lower() != "false"
        client["endpoint_url"] = endpoint if "://" in endpoint else ("https://" if ssl else "http://") + endpoint
    if hadoop.get("fs.s3a.endpoint.region"):
        client["region_name"] = hadoop["fs.s3a.endpoint.region"]
    if client:
        out["client_kwargs"] = client
    if str(hadoop.get("fs.s3a.path.style.access", "false")).lower() == "true":
        out["config_kwargs"] = {"s3": {"addressing_style": "path"}}
    if "anonymous" in str(hadoop.get("fs.s3a.aws.credentials.provider", "")).lower():
        out["anon"] = True
    return out


def _json_option(opts, name):
    try:
        return json.loads(opts[name])
    except ValueError as e:
        raise InvalidConfigError(f"option {_name(name)} is not valid JSON: {e}") from None


def _partition_map(opts, name) -> dict | None:
    if name not in opts:
        return None
    value = _json_option(opts, name)
    if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
        raise InvalidConfigError(f'option {_name(name)} must be JSON like {{"topic":{{"0":123}}}}')
    try:
        return {t: {int(p): int(o) for p, o in parts.items()} for t, parts in value.items()}
    except (TypeError, ValueError):
        raise InvalidConfigError(f"option {_name(name)} must map partition numbers to integers") from None


def _offsets_option(opts, name, default, *, allow_latest):
    raw = opts.get(name, default)
    if raw in ("earliest", "latest") or (raw == GROUP and name == "startingoffsets"):
        return raw
    return _partition_map({name: raw}, name)


def _int_option(opts, name, *, minimum) -> int | None:
    if name not in opts:
        return None
    try:
        value = int(opts[name])
    except ValueError:
        raise InvalidConfigError(f"option {_name(name)} must be an integer, got {opts[name]!r}") from None
    if value < minimum:
        raise InvalidConfigError(f"option {_name(name)} must be at least {minimum}, got {value}")
    return value


def _duration_ms_option(opts, name, default_ms: int) -> int:
    """A duration as Spark writes them (``15m``, ``30s``, ``500ms``, ``2h``; no unit: ms), in ms.

    >>> _duration_ms_option({"d": "15m"}, "d", 0), _duration_ms_option({"d": "250"}, "d", 0)
    (900000, 250)
    """
    if name not in opts:
        return default_ms
    m = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", str(opts[name]).lower())
    if m is None or m[2] not in _DURATION_MS and m[2] != "":
        raise InvalidConfigError(f"option {_name(name)} must be a duration such as 15m, 30s or 500ms, "
                                 f"got {opts[name]!r}")
    return int(int(m[1]) * _DURATION_MS.get(m[2] or "ms"))


def _bool_option(opts, name, default: bool) -> bool:
    raw = str(opts.get(name, default)).lower()
    if raw not in ("true", "false"):
        raise InvalidConfigError(f"option {_name(name)} must be true or false, got {opts[name]!r}")
    return raw == "true"
