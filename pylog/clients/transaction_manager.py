"""``TransactionManager``: a producer's idempotence and transaction state, as Kafka's
``TransactionManager``: its producer id and epoch, the next sequence of each partition
(wrapping as ``increment_sequence`` says), and, with a ``transactional_id``, the transaction's
state as an explicit :class:`State` with the transitions Kafka allows, its partitions, and
the fencing of an older instance.

The producer id is allocated uniquely for the log dir (pylog/logdir/producer_ids.py); a
transactional id's comes from the transaction coordinator
(pylog/coordinator/txn_coordinator.py), its epoch bumped by each new instance, which fences
the older one (:class:`ProducerFencedError`, a fatal state). A failed send or offset commit
inside a transaction leaves it abortable only (Kafka's rule).

Thread safety: the state moves in the producer's caller's thread, and in the thread
appending a batch when that append fails (:meth:`TransactionManager.fail`); each move is one assignment.
"""

from __future__ import annotations

import enum

from pylog.logdir.producer_ids import allocate_producer_id
from pylog.coordinator.group_coordinator import GroupCoordinator
from pylog.coordinator.partitioning import DEFAULT_PARTITIONS
from pylog.coordinator.txn_coordinator import TransactionCoordinator
from pylog.errors import ClientStateError, InvalidArgumentError, ProducerFencedError, TransactionAbortableError
from pylog.record.batch import increment_sequence


class State(enum.Enum):
    """A producer's transaction state (Kafka's ``TransactionManager.State``, without the
    states of its asynchronous requests: here they are calls that return done)."""
    READY = "ready"  # no transaction open: begin one, or send without (idempotent only)
    IN_TRANSACTION = "in transaction"
    ABORTABLE_ERROR = "abortable error"  # a send or offset commit of the transaction failed: abort only
    FATAL_ERROR = "fatal error"  # fenced by a newer instance: close only
    CLOSED = "closed"


_VALID_SOURCES = {
    State.READY: {State.IN_TRANSACTION, State.ABORTABLE_ERROR},  # commit; abort
    State.IN_TRANSACTION: {State.READY},
    State.ABORTABLE_ERROR: {State.IN_TRANSACTION, State.ABORTABLE_ERROR},
    State.FATAL_ERROR: set(State) - {State.CLOSED},
    State.CLOSED: set(State),
}


def is_transition_valid(source: State, target: State) -> bool:
    """Whether a producer may move from ``source`` to ``target`` (Kafka's
    ``isTransitionValid``): a transaction opens from READY only, ends (to READY) from
    IN_TRANSACTION, or by an abort from ABORTABLE_ERROR; anything can be fenced or closed,
    and nothing leaves CLOSED."""
    return source in _VALID_SOURCES[target]


class TransactionManager:
    """The idempotence and transaction state of one producer of the log dir ``root``
    (see the module's doc). ``pool``: the log dir's writer pool, which the transaction
    coordinator appends through."""

    def __init__(self, root: str, pool, *, transactional_id: str | None, enable_idempotence: bool,
                 transaction_timeout_ms: int, transaction_state_partitions: int | None = None):
        self.root, self.transactional_id = root, transactional_id
        self.transactional = transactional_id is not None
        self.state = State.READY
        self.usable = True  # sends may go on (READY or IN_TRANSACTION): a plain flag, read on each send
        self.last_error: Exception | None = None  # why the state is ABORTABLE_ERROR or FATAL_ERROR
        self._sequences: dict[tuple[str, int], int] = {}
        self.partitions: set = set()  # those the open transaction wrote to
        self._coordinator: TransactionCoordinator | None = None
        self._groups: GroupCoordinator | None = None  # once offsets were sent in a transaction
        self.producer_id, self.producer_epoch = -1, -1
        if transactional_id is not None:
            self._coordinator = TransactionCoordinator(root, pool,
                                                       partitions=transaction_state_partitions or DEFAULT_PARTITIONS)
            self.producer_id, self.producer_epoch = self._coordinator.init_producer_id(transactional_id,
                                                                                       transaction_timeout_ms)
        elif enable_idempotence:
            self.producer_id, self.producer_epoch = allocate_producer_id(root), 0

    def _transition(self, target: State, error: Exception | None = None) -> None:
        if not is_transition_valid(self.state, target):
            raise ClientStateError(f"a producer cannot go from {self.state.value} to {target.value}")
        self.state = target
        self.usable = target is State.READY or target is State.IN_TRANSACTION
        if error is not None or target is State.READY:
            self.last_error = error

    # -- sequences ----------------------------------------------------------------------------
    def sequence(self, tp) -> int:
        """The base sequence of ``tp``'s next batch; -1 without idempotence."""
        return self._sequences.get(tp, 0) if self.producer_id >= 0 else -1

    def advance(self, tp, records: int) -> None:
        """``records`` were appended to ``tp`` from :meth:`sequence` on (it wraps at
        2^31 - 1, as Kafka's sequences do: ``increment_sequence``)."""
        if self.producer_id >= 0:
            self._sequences[tp] = increment_sequence(self._sequences.get(tp, 0), records)

    # -- the states ---------------------------------------------------------------------------
    def check_usable(self) -> None:
        """Raise why sends cannot go on: closed, fenced, or the transaction abortable only."""
        if self.state is State.CLOSED:
            raise ClientStateError("producer is closed")
        if self.state is State.FATAL_ERROR:
            raise ProducerFencedError(str(self.last_error))
        if self.state is State.ABORTABLE_ERROR:
            raise TransactionAbortableError(f"a send or offset commit of the open transaction failed "
                                            f"({type(self.last_error).__name__}: {self.last_error}); "
                                            f"call abort_transaction()")

    def fail(self, error: Exception) -> None:
        """A batch's append (or an offset commit) failed with ``error``: a fenced producer
        is done for; an open transaction can only abort (the first error is kept)."""
        if isinstance(error, ProducerFencedError):
            if self.state is not State.CLOSED:
                self._transition(State.FATAL_ERROR, error)
        elif self.state is State.IN_TRANSACTION:
            self._transition(State.ABORTABLE_ERROR, error)

    def _fenced(self, error: ProducerFencedError) -> ProducerFencedError:
        self.fail(error)
        return error

    def close(self) -> None:
        """Closed for good; the transaction coordinator and group coordinator are released
        (an open transaction is left for the next instance to abort)."""
        self._transition(State.CLOSED)
        coordinator, self._coordinator = self._coordinator, None
        groups, self._groups = self._groups, None
        try:
            if coordinator is not None:
                coordinator.close()
        finally:
            if groups is not None:
                groups.release()

    # -- transactions -------------------------------------------------------------------------
    def require_transactional(self) -> None:
        if self.transactional_id is None:
            raise ClientStateError("this producer has no transactional_id")
        if self.state is State.CLOSED:
            raise ClientStateError("producer is closed")

    def require_open(self) -> None:
        """:class:`ClientStateError` unless a transaction is open (in any state)."""
        self.require_transactional()
        if self.state is State.READY:
            raise ClientStateError("no transaction in progress")

    def begin(self) -> None:
        self.require_transactional()
        if self.state is State.FATAL_ERROR:
            self.check_usable()
        if self.state is not State.READY:
            raise ClientStateError("a transaction is already in progress")
        self._transition(State.IN_TRANSACTION)
        self.partitions = set()

    def maybe_add_partitions(self, partitions) -> None:
        """Make ``partitions`` part of the open transaction (those not yet), before any
        record goes to them: one write of the transaction's state when any is new."""
        if self.state is State.READY:
            raise ClientStateError("send outside a transaction: call begin_transaction() first")
        self.check_usable()
        new = [tp for tp in partitions if tp not in self.partitions]
        if not new:
            return
        try:
            self._coordinator.add_partitions(self.transactional_id, self.producer_id, self.producer_epoch, new)
        except ProducerFencedError as e:
            raise self._fenced(e)
        self.partitions.update(new)

    def send_offsets(self, offsets: dict, group_id: str, generation: int, member_id: str, sender) -> None:
        """Commit ``offsets`` (checked) for ``group_id`` in the open transaction: the
        group coordinator appends them as one batch through ``sender.append_atomic``.
        A failure other than bad arguments leaves the transaction abortable only."""
        self.require_transactional()
        if self._groups is None:
            self._groups = GroupCoordinator.for_root(self.root)
        self.maybe_add_partitions([self._groups.offsets_partition(group_id)])
        try:
            self._groups.commit_offsets(group_id, offsets, generation=generation, member_id=member_id,
                                        sender=sender)
        except InvalidArgumentError:
            raise  # refused before anything was tried: the transaction can go on
        except Exception as e:
            self.fail(e)
            raise

    def end(self, *, commit: bool) -> None:
        """Commit or abort the open transaction (the caller appended its batches first):
        :class:`ProducerFencedError` when fenced, :class:`TransactionAbortableError` for
        a commit of a transaction a failure left abortable (nothing is committed)."""
        self.require_open()
        if self.state is State.FATAL_ERROR:
            raise ProducerFencedError(str(self.last_error))
        if commit and self.state is State.ABORTABLE_ERROR:
            error = self.last_error
            raise TransactionAbortableError(
                f"transaction of {self.transactional_id!r} not committed: a send or offset commit in it failed "
                f"({type(error).__name__}: {error}); call abort_transaction()") from error
        try:
            self._coordinator.end_transaction(self.transactional_id, self.producer_id, self.producer_epoch, commit)
        except ProducerFencedError as e:
            raise self._fenced(e)
        self._transition(State.READY)
        self.partitions = set()
