"""The rule of every ``close()`` that holds several things (logs, locks, threads, files):
release all of them even when one fails (a full disk refusing a last write), then raise
the first failure, so that nothing stays held and the caller still learns what failed."""

from __future__ import annotations

from typing import Callable, Iterable


def close_all(steps: Iterable[Callable[[], object]]) -> None:
    """Call each of ``steps`` in order, whatever the others raise; then raise the first
    exception any of them raised (``Exception`` only: an interrupt stops at once)."""
    first = None
    for step in steps:
        try:
            step()
        except Exception as e:  # noqa: BLE001 - raised once every step ran
            first = first or e
    if first is not None:
        raise first
