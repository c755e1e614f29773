"""``close_all``: the rule of every close() that holds several things."""

from __future__ import annotations

import pytest

from pylog.closing import close_all
from pylog.errors import StorageError


def test_every_step_runs_and_the_first_failure_is_raised():
    ran = []

    def fails(n):
        def step():
            ran.append(n)
            raise StorageError(28, f"step {n}: no space left")
        return step
    with pytest.raises(StorageError, match="step 1"):
        close_all([lambda: ran.append(0), fails(1), lambda: ran.append(2), fails(3)])
    assert ran == [0, 1, 2, 3]


def test_an_interrupt_stops_at_once():
    ran = []

    def interrupted():
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        close_all([interrupted, lambda: ran.append(1)])
    assert ran == []
