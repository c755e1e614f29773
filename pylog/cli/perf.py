"""``pylog perf``: Kafka's producer and consumer performance tests, for pylog.

Produces N records of S bytes into a log (a temporary directory by default), then
consumes them back twice (as ``Record`` objects, then columnar), and prints records/s,
MB/s, the read figure beside the write figure, the latency of one append call, the environment (C speedups, codec library) and how
the figures compare with the ones in docs/PERFORMANCE.md. ``--json`` prints one JSON object
instead (keys in docs/cli.md).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import sys
import tempfile
import time

import numpy as np
from tqdm import tqdm

import pylog
from pylog.errors import InvalidConfigError
from pylog.layout import INT64_MAX
from pylog.log import Log
from pylog.record.columnar import decode_columns

FLUSH_CHOICES = ("none", "batch")
#: compression -> (library module doing it, distribution name for its version)
CODEC_LIBRARIES = {"none": None, "gzip": ("zlib", None), "snappy": ("cramjam", "cramjam"),
                   "lz4": ("lz4.frame", "lz4"), "zstd": ("zstandard", "zstandard")}
#: libraries on every code path of the workload
CORE_LIBRARIES = ("numpy", "crc32c")
#: docs/PERFORMANCE.md, relative to the package directory (present in a source checkout)
PERFORMANCE_DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "PERFORMANCE.md")
#: the workload of the bench rows perf compares with (benches/bench_append.py, bench_read.py)
BENCH_WORKLOAD = {"record_size": 100, "batch_size": 1000, "compression": "none", "flush": "none"}
BENCH_ROWS = {"produce": "append batch=1000 value=100B", "consume": "read sequential objects",
              "consume_columnar": "read sequential columnar"}


def add_parser(sub) -> None:
    p = sub.add_parser("perf", description="Producer/consumer performance test on a pylog partition: produce, consume "
                                   "as records, consume columnar; compared with docs/PERFORMANCE.md.")
    p.add_argument("--records", type=int, default=2_000_000, help="records to produce (default 2,000,000)")
    p.add_argument("--record-size", type=int, default=100, help="value bytes per record (default 100)")
    p.add_argument("--batch-size", type=int, default=1000, help="records per append call (default 1,000)")
    p.add_argument("--compression", default="none", choices=list(CODEC_LIBRARIES),
                   help="batch compression codec (default none)")
    p.add_argument("--flush", default="none", metavar="POLICY",
                   help="none (default), batch (fsync every append) or a message count N")
    p.add_argument("--segment-bytes", type=int, default=256 * 1024 * 1024,
                   help="roll a new segment at this size (default 256 MiB)")
    p.add_argument("--dir", help="partition directory to use (default: a temporary one, removed after)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars even on a terminal")
    p.add_argument("--json", action="store_true", help="print one JSON object (keys in docs/cli.md)")
    p.set_defaults(run=run)


def _flush_messages(policy: str, batch_size: int) -> int:
    if policy == "none":
        return INT64_MAX
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
            consumed = _consume(log, produced["first_offset"], args.records, progress)
            columnar = _consume_columnar(log, produced["first_offset"], args.records, progress)
        result = perf_result(args, produced, consumed, columnar)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(result, indent=1) if args.json else "\n".join(report_lines(result)))
    return 0


def _bar(desc: str, total: int, progress: bool):
    """A progress bar on stderr that stays on screen when done."""
    return tqdm(total=total, desc=desc, unit="rec", unit_scale=True, disable=not progress, file=sys.stderr,
                leave=True)


def _produce(log, args, progress: bool) -> dict:
    rng = np.random.default_rng(0)
    pool = rng.integers(0, 256, size=args.record_size * args.batch_size, dtype=np.uint8).tobytes()
    values = [pool[i * args.record_size:(i + 1) * args.record_size] for i in range(args.batch_size)]
    batches, rest = divmod(args.records, args.batch_size)
    latencies = np.empty(batches + (1 if rest else 0))
    first = log.log_end_offset
    with _bar("produce", args.records, progress) as bar:
        start = time.perf_counter()
        for i in range(len(latencies)):
            chunk = values if i < batches else values[:rest]
            t0 = time.perf_counter()
            log.append(chunk, compression=args.compression)
            latencies[i] = time.perf_counter() - t0
            bar.update(len(chunk))
        elapsed = time.perf_counter() - start
    return {"seconds": elapsed, "latencies": latencies, "first_offset": first}


def _consume(log, first_offset: int, count: int, progress: bool) -> float:
    """Seconds to read ``count`` records back as ``Record`` objects, taking each one's key
    and value (as benches/bench_stores.py reads every store)."""
    n = 0
    with _bar("consume (records)", count, progress) as bar:
        start = time.perf_counter()
        for r in log.records(first_offset):
            r.key, r.value  # noqa: B018
            n += 1
            if n % 10_000 == 0:
                bar.update(10_000)
        elapsed = time.perf_counter() - start
        bar.update(n % 10_000)
    if n != count:
        raise RuntimeError(f"consumed {n} records, expected {count}")
    return elapsed


def _consume_columnar(log, first_offset: int, count: int, progress: bool) -> float:
    """Seconds to read ``count`` records back as columns (8 MiB fetches)."""
    offset, n = first_offset, 0
    with _bar("consume (columnar)", count, progress) as bar:
        start = time.perf_counter()
        while n < count:
            fetch = log.read(offset, 8 << 20)
            if fetch.size_bytes == 0:
                break
            cols = decode_columns(fetch.raw(), min_offset=offset)
            n += cols.num_rows
            bar.update(cols.num_rows)
            offset = fetch.next_offset
        elapsed = time.perf_counter() - start
    return elapsed


def _rate(records: int, nbytes: int, seconds: float) -> dict:
    return {"seconds": round(seconds, 3), "records_per_s": round(records / seconds),
            "mb_per_s": round(nbytes / 1e6 / seconds, 1)}


def perf_result(args, produced: dict, consume_s: float, columnar_s: float) -> dict:
    """The figures and their context as one JSON-ready dict (keys documented in docs/cli.md)."""
    nbytes = args.records * args.record_size
    lat = produced["latencies"] * 1000
    p50, p99, p999 = np.percentile(lat, [50, 99, 99.9])
    workload = {"records": args.records, "record_size": args.record_size, "batch_size": args.batch_size,
                "compression": args.compression, "flush": args.flush, "segment_bytes": args.segment_bytes}
    result = {
        "workload": workload,
        "produce": _rate(args.records, nbytes, produced["seconds"]),
        "append_latency_ms": {"per": f"append of {args.batch_size:,} records", "p50": round(p50, 3),
                              "p99": round(p99, 3), "p999": round(p999, 3), "max": round(float(lat.max()), 3)},
        "consume": _rate(args.records, nbytes, consume_s),
        "consume_columnar": _rate(args.records, nbytes, columnar_s),
        "environment": environment(args.compression),
    }
    result["reference"] = reference(workload, result)
    return result


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def environment(compression: str) -> dict:
    """What the figures depend on besides pylog: C speedups, codec library, machine, load."""
    import zlib

    codec = CODEC_LIBRARIES[compression]
    codec_info = None
    if codec is not None:
        module, dist = codec
        codec_info = {"library": module, "version": zlib.ZLIB_RUNTIME_VERSION if dist is None else _version(dist)}
    return {"pylog": pylog.__version__, "speedups": pylog.SPEEDUPS, "codec": codec_info,
            "libraries": {name: _version(name) for name in CORE_LIBRARIES},
            "python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count(),
            "load_average_1m": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None}


def read_reference(path: str = PERFORMANCE_DOC) -> dict | None:
    """The machine line and the bench rows perf compares with, from docs/PERFORMANCE.md;
    None when the file is not there (an install without the source checkout)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return None
    machine = re.search(r"^Machine: ([^.]*(?:\.\d+[^.]*)*)\.", text, re.M)
    out = {"source": "docs/PERFORMANCE.md", "machine": machine.group(1) if machine else None}
    for key, row in BENCH_ROWS.items():
        m = re.search(rf"^\| {re.escape(row)} \|.*?records_per_s = (\d+)", text, re.M)
        out[f"{key}_records_per_s"] = int(m.group(1)) if m else None
    return out


def reference(workload: dict, result: dict) -> dict | None:
    """How this run relates to docs/PERFORMANCE.md: its figures, and what differs."""
    ref = read_reference()
    if ref is None:
        return None
    differs = [f"{k.replace('_', ' ')} {workload[k]} (bench: {v})" for k, v in BENCH_WORKLOAD.items()
               if workload[k] != v]
    differs.append(f"{workload['records']:,} records, about {workload['records'] * (workload['record_size'] + 8) / 1e6:,.0f} MB "
                   "on disk (bench: 16 MB per run, best of 2, well inside the page cache; a large run waits "
                   "for the kernel's dirty-page writeback)")
    differs.append("per-append timing and progress bars (bench: one timer around the whole loop)")
    if ref["machine"] and result["environment"]["platform"] not in ref["machine"]:
        differs.append(f"platform {result['environment']['platform']} (bench: another machine or kernel)")
    load = result["environment"]["load_average_1m"]
    if load is not None:
        differs.append(f"load average {load} on {result['environment']['cpus']} CPUs (bench: a machine to itself)")
    if not result["environment"]["speedups"]:
        differs.append("C speedups off (bench: on)")
    ref["same_workload"] = all(workload[k] == v for k, v in BENCH_WORKLOAD.items())
    ref["differences"] = differs
    return ref


def report_lines(result: dict) -> list[str]:
    """The human-readable report of :func:`perf_result`."""
    w, env = result["workload"], result["environment"]
    lines = [f"workload: {w['records']:,} records of {w['record_size']} B in appends of {w['batch_size']:,}, "
             f"compression {w['compression']}, flush {w['flush']}",
             _environment_line(env)]
    for key, label in (("produce", "produce"), ("consume", "consume (records)"),
                       ("consume_columnar", "consume (columnar)")):
        r = result[key]
        lines.append(f"{label}: {r['records_per_s']:,} records/s, {r['mb_per_s']:,} MB/s, {r['seconds']:.2f} s")
    write, read = result["produce"]["records_per_s"], result["consume"]["records_per_s"]
    lines.append(f"write / read (records): {write / 1e6:,.2f}M / {read / 1e6:,.2f}M records/s, "
                 f"read {read / write:.2f}x write")
    lat = result["append_latency_ms"]
    lines.append(f"latency per {lat['per']} (ms): p50 {lat['p50']:.3f}, p99 {lat['p99']:.3f}, "
                 f"p999 {lat['p999']:.3f}, max {lat['max']:.3f}")
    lines += _reference_lines(result)
    return lines


def _environment_line(env: dict) -> str:
    codec = "no codec" if env["codec"] is None else f"codec {env['codec']['library']} {env['codec']['version']}"
    libs = ", ".join(f"{k} {v}" for k, v in env["libraries"].items())
    return (f"pylog {env['pylog']}, C speedups {'on' if env['speedups'] else 'off'}, {codec}, {libs}, "
            f"Python {env['python']}, {env['cpus']} CPUs, load average {env['load_average_1m']}")


def _reference_lines(result: dict) -> list[str]:
    ref = result["reference"]
    if ref is None:
        return ["compared with docs/PERFORMANCE.md: not found beside this install (a source checkout has it)"]
    lines = [f"compared with docs/PERFORMANCE.md ({ref['machine']}):"]
    for key in BENCH_ROWS:
        documented = ref[f"{key}_records_per_s"]
        if documented:
            ratio = result[key]["records_per_s"] / documented
            lines.append(f"  {key.replace('_', ' ')}: {documented:,} records/s documented, this run {ratio:.2f}x")
    lines.append("  same workload as the bench rows" if ref["same_workload"] else "  a different workload")
    lines += [f"  differs: {d}" for d in ref["differences"]]
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="pylog-perf")
    add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["perf", *(argv or [])])
    return run(args)
