"""``python -m pylog.spark.jvm.plan``: the JVM reader's planning, done by the Python planner.

A long-lived process (one per Spark driver, so a query pays no Python start): each line on
stdin is a request ``{"options": {...}, "pruned": {...}}`` (the query's options, the bounds
of pushed filters); each reply is one line, ``{"root", "committed", "failOnDataLoss",
"ranges": [[topic, partition, start, end, aborted, directory], ...]}`` (``directory``: the
partition's directory or URL, :attr:`OffsetRange.directory <pylog.spark.plan.OffsetRange.directory>`;
``aborted``, for a
``read_committed`` query: ``[[producer id, first offset], ...]`` of the aborted transactions
overlapping the range, as the log's checked ``.txnindex`` files, or a replay of the log where
they are missing or wrong, give them; else ``[]``), or ``{"error": message}`` for bad
options or offsets. A request ``{"check": path, "options": {...}}`` (at ``load()``) is answered ``{}``
when ``path`` is a log dir to read (for the JVM reader, a URL must hold a plain log dir, not a
tiered layout), else with the error. A URL's options carry the session's ``fs.s3a.*`` Hadoop
settings, taken as its storage options when the query gives none. A stream's requests carry
``"stream"``: ``"initial"`` and ``"latest"`` are answered ``{"offsets": {"topic": {"partition":
offset}}}``, ``"ranges"`` (with ``"start"`` and ``"end"`` offsets) like a plan, and ``"capped"``
(``"start"``, ``"end"``, ``"maxOffsets"``) with the end offsets ``maxOffsetsPerTrigger`` allows
(:func:`~pylog.spark.plan.capped_offsets`, the Python source's rule); ``"admission"`` with
the query's ``maxOffsets``, ``minOffsets`` (null when not set) and ``maxTriggerDelayMs``, as
the Python source parses them. It ends when stdin closes. One option parser and one range planner
serve both readers (docs/spark.md).
"""

from __future__ import annotations

import dataclasses
import json
import sys

from pylog.errors import InvalidConfigError, PylogError
from pylog.remote.log import RemoteLog
from pylog.remote.segment import segment_at
from pylog.spark.options import parse_read_options, storage_options
from pylog.errors import OffsetOutOfRangeError
from pylog.spark.plan import OffsetReader, capped_offsets, open_log, plan_ranges, prune_ranges, require_log_dir, split_ranges


def plan_request(request: dict) -> dict:
    """The reply for one request (see the module docstring)."""
    if "check" in request:
        options = {k.lower(): v for k, v in (request.get("options") or {}).items()}
        require_log_dir(request["check"], storage_options(options),
                        plain=options.get("reader", "auto").lower() != "python")
        return {}
    if "stream" in request:
        return _stream_request(request)
    opts = parse_read_options(request["options"])
    _require_plain(opts)
    pruned = dict(request.get("pruned") or {})
    for key in ("topic", "partition"):
        if key in pruned:
            pruned[key] = set(pruned[key])
    return _reply(opts, prune_ranges(plan_ranges(opts), pruned))


def _require_plain(opts) -> None:
    if opts.remote_storage is not None:
        raise InvalidConfigError("option remote_storage (tiered segments below the local log start) is read by the "
                                 "Python source: add option reader=python")


def _reply(opts, ranges) -> dict:
    """A plan's reply: the ranges, with their aborted transactions for ``read_committed``."""
    committed = opts.isolation == "committed"
    aborted = _aborted_transactions(ranges) if committed else {}
    return {"root": opts.root, "committed": committed, "failOnDataLoss": opts.fail_on_data_loss,
            "ranges": [[r.topic, r.partition, r.start, r.end, aborted.get(r, []), r.directory]
                       for r in ranges]}


def _stream_request(request: dict) -> dict:
    """A JVM stream's request (see the module docstring)."""
    if request["stream"] == "capped":
        return {"offsets": capped_offsets(request["start"], request["end"], request["maxOffsets"])}
    opts = parse_read_options(request["options"], streaming=True)
    if request["stream"] == "admission":
        return {"maxOffsets": opts.max_offsets_per_trigger, "minOffsets": opts.min_offsets_per_trigger,
                "maxTriggerDelayMs": opts.max_trigger_delay_ms}
    _require_plain(opts)
    with OffsetReader.open(opts) as reader:
        if request["stream"] == "initial":
            return {"offsets": _nested(reader.partition_offsets(starting=True))}
        if request["stream"] == "latest":
            return {"offsets": _nested(reader.latest())}
        start, end = request["start"], request["end"]
        ranges = [_checked_start(reader.manager.log(r.topic, r.partition), r, str(r.partition) in
                                 start.get(r.topic, {}), opts.fail_on_data_loss)
                  for r in reader.ranges_from_resolved(start, end)]
        ranges = [r for r in ranges if r.end > r.start]
        return _reply(opts, split_ranges(reader.manager, ranges, opts.min_partitions,
                                         opts.max_records_per_partition))


def _nested(offsets: dict) -> dict:
    """``{(topic, partition): offset}`` as a stream's offset: ``{"topic": {"partition": offset}}``."""
    out: dict = {}
    for (t, p), offset in offsets.items():
        out.setdefault(t, {})[str(p)] = offset
    return out


def _checked_start(log, r, known: bool, fail_on_data_loss: bool):
    """Micro-batch range ``r`` from where ``log`` can still be read: a partition the stream
    did not know (``known`` false) from its log start; else a start below the log start is
    data loss, an :class:`OffsetOutOfRangeError` naming the first missing offset unless
    ``fail_on_data_loss`` is false."""
    first = log.log_start_offset
    if r.start >= first:
        return r
    if known and fail_on_data_loss:
        raise OffsetOutOfRangeError(
            f"{r.topic}-{r.partition}: offsets {r.start} to {first - 1} were removed before the stream read them "
            f"(the log now starts at {first}: retention, DeleteRecords or deleted segments); set "
            f"failOnDataLoss=false to skip them")
    return dataclasses.replace(r, start=min(first, r.end))


def _aborted_transactions(ranges) -> dict:
    """``{range: [[producer id, first offset], ...]}``: what a committed fetch at each
    range's start learns of the aborted transactions from there on (Kafka's
    FetchResponse.abortedTransactions), so the JVM reader skips exactly what the Python
    reader skips. O(segments of each range) once each log's transaction indexes are checked."""
    out = {}
    for r in ranges:
        if r.start >= r.end:
            continue
        with open_log(r) as log:
            if isinstance(log, RemoteLog):  # its fetches learn only of the transactions overlapping the bytes fetched
                found = log._aborted_between(segment_at(log.segments, r.start), r.start, r.end)
            else:
                found = log.read(r.start, 1, isolation="committed", max_offset=r.end).aborted_transactions or ()
            out[r] = [[t.producer_id, t.first_offset] for t in found if t.first_offset < r.end]
    return out


def main() -> int:
    for line in sys.stdin:
        try:
            reply = plan_request(json.loads(line))
        except (PylogError, OSError) as e:  # answered, not a dead planner
            reply = {"error": f"{type(e).__name__}: {e}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
