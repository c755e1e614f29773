"""``pylog perf``: Kafka's producer and consumer performance tests, for pylog.

Produces N records of S bytes into a log (a temporary directory by default), then
consumes them back, and prints records/s, MB/s and append latency percentiles.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

import numpy as np
from tqdm import tqdm

from pylog.errors import InvalidConfigError

FLUSH_CHOICES = ("none", "batch")


def add_parser(sub) -> None:
    p = sub.add_parser("perf", help="produce then consume N records and report throughput and latency",
                       description="Producer/consumer performance test on a pylog partition.")
    p.add_argument("--records", type=int, default=2_000_000, help="records to produce (default 2,000,000)")
    p.add_argument("--record-size", type=int, default=100, help="value bytes per record (default 100)")
    p.add_argument("--batch-size", type=int, default=1000, help="records per append (default 1,000)")
    p.add_argument("--compression", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"])
    p.add_argument("--flush", default="none", metavar="POLICY",
                   help="none (default), batch (fsync every append) or a message count N")
    p.add_argument("--segment-bytes", type=int, default=256 * 1024 * 1024)
    p.add_argument("--dir", help="partition directory to use (default: a temporary one, removed after)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar even on a terminal")
    p.set_defaults(run=run)


def _flush_messages(policy: str, batch_size: int) -> int:
    if policy == "none":
        return 2**63 - 1
    if policy == "batch":
        return batch_size
    try:
        n = int(policy)
    except ValueError:
        raise InvalidConfigError(f"--flush must be none, batch or a positive count, got {policy!r}") from None
    if n < 1:
        raise InvalidConfigError(f"--flush count must be positive, got {n}")
    return n


def run(args) -> int:
    from pylog.log import Log
    for name in ("records", "record_size", "batch_size"):
        if getattr(args, name) < 1:
            raise InvalidConfigError(f"--{name.replace('_', '-')} must be positive")
    flush_messages = _flush_messages(args.flush, args.batch_size)
    tmp = None
    if args.dir:
        path = args.dir
    else:
        tmp = tempfile.mkdtemp(prefix="pylog-perf-")
        path = os.path.join(tmp, "perf-0")
    progress = sys.stderr.isatty() and not args.no_progress
    try:
        with Log.open(path, segment_bytes=args.segment_bytes, flush_messages=flush_messages) as log:
            produced = _produce(log, args, progress)
            consumed = _consume(log, produced["first_offset"], args.records)
        _report(args, produced, consumed)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


def _produce(log, args, progress: bool) -> dict:
    rng = np.random.default_rng(0)
    pool = rng.integers(0, 256, size=args.record_size * args.batch_size, dtype=np.uint8).tobytes()
    values = [pool[i * args.record_size:(i + 1) * args.record_size] for i in range(args.batch_size)]
    batches, rest = divmod(args.records, args.batch_size)
    latencies = np.empty(batches + (1 if rest else 0))
    first = log.log_end_offset
    bar = tqdm(total=args.records, desc="produce", unit="rec", unit_scale=True, disable=not progress,
               file=sys.stderr, leave=False)
    start = time.perf_counter()
    for i in range(len(latencies)):
        chunk = values if i < batches else values[:rest]
        t0 = time.perf_counter()
        log.append(chunk, compression=args.compression)
        latencies[i] = time.perf_counter() - t0
        bar.update(len(chunk))
    elapsed = time.perf_counter() - start
    bar.close()
    return {"seconds": elapsed, "latencies": latencies, "first_offset": first,
            "bytes": args.records * args.record_size}


def _consume(log, first_offset: int, count: int) -> dict:
    start = time.perf_counter()
    n = 0
    nbytes = 0
    for r in log.records(first_offset):
        n += 1
        nbytes += len(r.value)
    elapsed = time.perf_counter() - start
    if n != count:
        raise RuntimeError(f"consumed {n} records, expected {count}")
    return {"seconds": elapsed, "records": n, "bytes": nbytes,
            "columnar_seconds": _consume_columnar(log, first_offset, count)}


def _consume_columnar(log, first_offset: int, count: int) -> float:
    from pylog.record.columnar import decode_columns
    start = time.perf_counter()
    offset, n = first_offset, 0
    while n < count:
        fetch = log.read(offset, 8 << 20)
        if fetch.size_bytes == 0:
            break
        cols = decode_columns(fetch.raw(), min_offset=offset)
        n += cols.num_rows
        offset = fetch.next_offset
    return time.perf_counter() - start


def _report(args, produced: dict, consumed: dict) -> None:
    mb = produced["bytes"] / 1e6
    lat = produced["latencies"] * 1000
    p50, p99, p999 = np.percentile(lat, [50, 99, 99.9])
    print(f"produce: {args.records:,} records of {args.record_size} B in batches of {args.batch_size:,}, "
          f"compression {args.compression}, flush {args.flush}")
    print(f"produce: {args.records / produced['seconds']:,.0f} records/s, {mb / produced['seconds']:,.1f} MB/s, "
          f"{produced['seconds']:.2f} s")
    print(f"append latency ms: p50 {p50:.3f}, p99 {p99:.3f}, p999 {p999:.3f}, max {lat.max():.3f}")
    print(f"consume (records): {consumed['records'] / consumed['seconds']:,.0f} records/s, "
          f"{consumed['bytes'] / 1e6 / consumed['seconds']:,.1f} MB/s, {consumed['seconds']:.2f} s")
    if "columnar_seconds" in consumed:
        s = consumed["columnar_seconds"]
        print(f"consume (columnar): {args.records / s:,.0f} records/s, {mb / s:,.1f} MB/s, {s:.2f} s")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="pylog-perf")
    add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["perf", *(argv or [])])
    return run(args)
