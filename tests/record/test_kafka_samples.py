"""Every Kafka-written sample decodes to exactly what Kafka's own decoder reads."""

from __future__ import annotations

import pytest

from pylog import decode_batches
from tests.conftest import needs_samples, sample_logs
from tests.record.expected import expected_rows, rows_of

LOGS = sample_logs()


@needs_samples
def test_samples_are_present():
    assert len(LOGS) >= 40, "expected the shared Kafka samples (46 .log files)"


@needs_samples
@pytest.mark.parametrize("log_path", LOGS, ids=lambda p: "/".join(p.parts[-2:]))
def test_sample_decodes_like_kafka(log_path):
    data = log_path.read_bytes()
    batches = list(decode_batches(data))
    assert all(b.is_valid() for b in batches)
    assert rows_of(batches) == expected_rows(log_path)
