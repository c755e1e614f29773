"""Reads: sequential records as objects, columnar decode, and sending bytes over a socket:
``FetchData.transfer_to`` (sendfile) vs ``read()`` + ``sendall`` vs raw ``os.sendfile``,
with CPU time per GB as well as wall time."""

from __future__ import annotations

import os
import socket
import threading
import time

from benches.conftest import record_figure, record_ratio
from pylog import Log
from pylog.record.columnar import decode_columns

RECORDS = 500_000


def _log(tmp_path):
    path = tmp_path / "r-0"
    values = [os.urandom(100) for _ in range(1000)]
    with Log.open(path) as log:
        for _ in range(RECORDS // 1000):
            log.append(values)
    return path


def test_sequential_reads(benchmark, tmp_path):
    path = _log(tmp_path)
    with Log.open(path, read_only=True) as log:
        def objects():
            return sum(1 for _ in log.records())

        def columnar():
            n, offset = 0, 0
            while offset < log.log_end_offset:
                f = log.read(offset, 8 << 20)
                n += decode_columns(f.raw(), min_offset=offset).num_rows
                offset = f.next_offset
            return n
        benchmark.pedantic(objects, rounds=1)
        t = time.perf_counter()
        assert objects() == RECORDS
        t_obj = time.perf_counter() - t
        t = time.perf_counter()
        assert columnar() == RECORDS
        t_col = time.perf_counter() - t
    record_figure("read sequential objects", records_per_s=round(RECORDS / t_obj))
    record_figure("read sequential columnar", records_per_s=round(RECORDS / t_col))


def _drain(sock, total):
    got = 0
    while got < total:
        chunk = sock.recv(1 << 20)
        if not chunk:
            break
        got += len(chunk)


def _send(fn, total):
    a, b = socket.socketpair()
    t = threading.Thread(target=_drain, args=(b, total))
    t.start()
    c0, w0 = time.process_time(), time.perf_counter()
    fn(a)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    a.close()
    t.join()
    b.close()
    return wall, cpu


def test_transfer_to_vs_read_sendall_vs_raw_sendfile(benchmark, tmp_path):
    path = _log(tmp_path)
    with Log.open(path, read_only=True) as log:
        seg = log.segments[0]
        size = seg.size_bytes

        def via_transfer(sock):
            f = log.read(0, size)
            f.transfer_to(sock)

        def via_read(sock):
            sock.sendall(log.read(0, size).raw())

        def via_raw(sock):
            with open(seg.log_path, "rb") as fh:
                sent = 0
                while sent < size:
                    sent += os.sendfile(sock.fileno(), fh.fileno(), sent, size - sent)
        benchmark.pedantic(lambda: _send(via_transfer, size), rounds=1)
        runs = {name: min(_send(fn, size) for _ in range(3))
                for name, fn in (("transfer_to", via_transfer), ("read+sendall", via_read), ("raw sendfile", via_raw))}
    gb = size / 1e9
    for name, (wall, cpu) in runs.items():
        record_figure(f"send {name}", gb_per_s=round(gb / wall, 2), cpu_s_per_gb=round(cpu / gb, 3))
    record_ratio("transfer_to vs raw os.sendfile (wall)", runs["raw sendfile"][0] / runs["transfer_to"][0], 0.9)
    record_ratio("transfer_to vs read()+sendall (wall)", runs["read+sendall"][0] / runs["transfer_to"][0], None)
