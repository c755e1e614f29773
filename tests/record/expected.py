"""Read ``expected/*.jsonl.gz`` (Kafka's own decoding of each sample) and render what
pylog decodes in the same shape, so tests compare whole rows."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
from pathlib import Path

from tests.conftest import SAMPLES


def expected_rows(log_path: Path) -> list[dict]:
    rel = log_path.relative_to(SAMPLES)
    exp = SAMPLES / "expected" / (str(rel) + ".jsonl.gz")
    with gzip.open(exp, "rt") as f:
        return [json.loads(line) for line in f]


def _b64(b):
    return None if b is None else base64.b64encode(b).decode()


def batch_fields(b) -> dict:
    return dict(base_offset=b.base_offset, last_offset=b.last_offset, magic=b.magic,
                codec=b.compression, timestamp_type=b.timestamp_type, max_timestamp=b.max_timestamp,
                transactional=b.is_transactional, control=b.is_control, producer_id=b.producer_id,
                producer_epoch=b.producer_epoch, base_sequence=b.base_sequence,
                partition_leader_epoch=b.partition_leader_epoch, position=b.position, size=b.size,
                crc=b.crc)


def record_fields(r) -> dict:
    return dict(offset=r.offset, timestamp=r.timestamp, key=_b64(r.key),
                value_len=-1 if r.value is None else len(r.value),
                value_sha256=None if r.value is None else hashlib.sha256(r.value).hexdigest(),
                headers=[[k, _b64(v)] for k, v in r.headers],
                control_type=getattr(r, "control_type", None))


def rows_of(batches) -> list[dict]:
    return [{**batch_fields(b), **record_fields(r)} for b in batches for r in b.records()]
