"""``pylog tiered pull URL DEST``: tiered segments in object storage back into partition
directories (pylog/remote/restore.py), which a broker and pylog open as their own.

``URL`` holds Aiven's layout, Kafka's LocalTieredStorage or a plain log dir;
``--remote-log-metadata LOGDIR`` names the log dir holding ``__remote_log_metadata`` (only
the live segments are restored; without it, the listing is de-duplicated by start offset and
a warning says that retried uploads may be double-counted). Prints one line per partition::

    events-0	segments: 3	offsets: 0..1199	/data/restored/events-0
"""

from __future__ import annotations

from pylog.cli.common import add_storage_arguments, storage_options
from pylog.remote.restore import pull


def add_parser(sub) -> None:
    p = sub.add_parser("tiered")
    actions = p.add_subparsers(dest="action", metavar="ACTION", help="what to do: pull (restore partition dirs)")
    actions.required = True
    pull = actions.add_parser("pull", help="rebuild partition directories from tiered segments at a URL")
    pull.add_argument("url", help="the object-store URL (s3://bucket/prefix, gs://, az://, file://) of the segments")
    pull.add_argument("dest", help="the log dir to write <topic>-<partition> directories into (created if missing)")
    pull.add_argument("--topic", help="restore only this topic's partitions")
    add_storage_arguments(pull)
    pull.set_defaults(run=run_pull)


def run_pull(args) -> int:
    restored = pull(args.url, args.dest, topic=args.topic, remote_log_metadata=args.remote_log_metadata,
                    storage_options=storage_options(args))
    for r in restored:
        offsets = f"{r.base_offsets[0]}..{r.log_end_offset - 1}" if r.base_offsets else "none"
        print(f"{r.topic}-{r.partition}\tsegments: {len(r.base_offsets)}\toffsets: {offsets}\t{r.path}")
    return 0
