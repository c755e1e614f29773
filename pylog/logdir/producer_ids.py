"""Producer ids, unique per log dir and never reused, as Kafka's controller hands them
out (in blocks of 1,000 to each broker; here one at a time).

The next free id is a decimal number in ``<log dir>/.pylog-producer-ids``, replaced
atomically (write, fsync, rename) under a lock on a byte of ``.pylog-clients.lock``, so
processes allocating at once get distinct ids and an id returned survives a crash. A log
dir without the file starts at 0. Cost: one small durable write per allocation (a few
milliseconds on a disk).
"""

from __future__ import annotations

import os

from pylog.errors import CorruptCheckpointError
from pylog.io import DEFAULT_IO
from pylog.layout import CLIENTS_LOCK_FILE
from pylog.locks import name_lock

PRODUCER_IDS_FILE = ".pylog-producer-ids"


def allocate_producer_id(root) -> int:
    """A producer id no other call on this log dir returned or will return."""
    path = os.path.join(root, PRODUCER_IDS_FILE)
    with name_lock(os.path.join(root, CLIENTS_LOCK_FILE), PRODUCER_IDS_FILE):
        next_id = read_next_producer_id(root)
        DEFAULT_IO.write_file(path, f"{next_id + 1}\n".encode())
        return next_id


def read_next_producer_id(root) -> int:
    """The id the next allocation returns. Raises :class:`CorruptCheckpointError` for a
    file that does not hold one number."""
    path = os.path.join(root, PRODUCER_IDS_FILE)
    try:
        with open(path, "rb") as f:
            text = f.read()
    except FileNotFoundError:
        return 0
    try:
        value = int(text.strip())
    except ValueError:
        value = -1
    if value < 0:
        raise CorruptCheckpointError(f"does not hold a producer id: {text[:40]!r}", path=path)
    return value
