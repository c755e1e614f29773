"""``CompletedFetch``: the records of one read of a partition that a consumer has not
returned yet (Kafka's ``CompletedFetch``), decoded a batch at a time as polls take them.

A poll that takes fewer records than the read holds leaves the other batches undecoded,
and one that takes a batch whole returns the list its decode built: the records a poll
returns were decoded last, still in the processor's cache when the caller loops over them.
Memory only: it holds the read's bytes (up to ``fetch_max_bytes``) until it is done.
"""

from __future__ import annotations


class CompletedFetch:
    """``lists``: the read's records, a list a batch (``FetchData.record_lists``), from
    ``position`` on. Valid while the partition's position is :attr:`position` (where the
    records not yet taken start): a seek, a rebalance or a pause drops it."""

    __slots__ = ("position", "_lists", "_records", "_start")

    def __init__(self, position: int, lists):
        self.position = position
        self._lists = lists
        self._records: list = []  # the batch being taken, from _start on
        self._start = 0

    def take(self, max_records: int) -> list:
        """Up to ``max_records`` records, the next in offset order; ``[]`` once the read
        has no more. Decodes (and checks the CRC of) the batches it reaches: an error of a
        batch is raised when a take reaches it, after the records before it were taken.
        The rest of a batch is returned as the list its decode built (the records given out
        before are cut from its front), so only a batch cut at its end is copied: O(records
        taken) in all."""
        out: list = []
        while len(out) < max_records:
            records, start = self._records, self._start
            if start == len(records):
                records = next(self._lists, None)
                if records is None:
                    break
                self._records, self._start = records, 0
                continue
            end = start + max_records - len(out)
            if end < len(records):
                part = records[start:end]
                self._start = end
            else:  # the rest of the batch: its own list, which the caller owns from here
                if start:
                    del records[:start]
                part = records
                self._records, self._start = [], 0
            if out:
                out += part
            else:
                out = part
        if out:
            self.position = out[-1].offset + 1
        return out
