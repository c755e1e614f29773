"""``pylog produce ROOT --topic T``: each line of stdin becomes a record."""

from __future__ import annotations

import sys

from pylog.record.record import Record


def add_parser(sub) -> None:
    p = sub.add_parser("produce", help="append lines from stdin as records")
    p.add_argument("root")
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int, help="partition (default: Kafka's partitioner on the key)")
    p.add_argument("--partitions", type=int, default=1, help="partitions if the topic is created (default 1)")
    p.add_argument("--key-separator", help="split each line into key and value at this string")
    p.add_argument("--compression", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"])
    p.add_argument("--batch-size", type=int, default=1000, help="records per append")
    p.set_defaults(run=run)


def run(args) -> int:
    from pylog.manager import LogManager
    with LogManager(args.root) as m:
        topic = m.create_topic(args.topic, args.partitions) if args.topic not in m.topics() else m.topic(args.topic)
        batch, total = [], 0
        for line in sys.stdin.buffer:
            line = line.rstrip(b"\r\n")
            if args.key_separator is not None:
                key, sep, value = line.partition(args.key_separator.encode())
                batch.append(Record(value, key=key) if sep else Record(line))
            else:
                batch.append(Record(line))
            if len(batch) >= args.batch_size:
                topic.append(batch, partition=args.partition, compression=args.compression)
                total += len(batch)
                batch = []
        if batch:
            topic.append(batch, partition=args.partition, compression=args.compression)
            total += len(batch)
    print(f"produced {total} record(s) to {args.topic}", file=sys.stderr)
    return 0
