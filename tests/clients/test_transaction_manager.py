"""``TransactionManager``: the transaction state machine (a transition table, as Kafka's
``TransactionManagerTest``), sequences wrapping at ``SEQUENCE_MODULUS``, fencing by a newer
instance, and a producer that cannot write outside its transaction."""

from __future__ import annotations

import itertools

import pytest

from pylog.clients import Producer
from pylog.clients.transaction_manager import State, TransactionManager, is_transition_valid
from pylog.logdir.writers import WriterPool
from pylog.errors import ClientStateError, ProducerFencedError, TransactionAbortableError
from pylog.layout import SEQUENCE_MODULUS
from tests.clients.conftest import make_topic

VALID = {
    (State.READY, State.IN_TRANSACTION),
    (State.IN_TRANSACTION, State.READY),
    (State.IN_TRANSACTION, State.ABORTABLE_ERROR),
    (State.ABORTABLE_ERROR, State.ABORTABLE_ERROR),
    (State.ABORTABLE_ERROR, State.READY),  # abort
    *((source, State.FATAL_ERROR) for source in State if source is not State.CLOSED),
    *((source, State.CLOSED) for source in State),
}


@pytest.mark.parametrize("source, target", list(itertools.product(State, State)),
                         ids=lambda s: s.name)
def test_the_transition_table(source, target):
    assert is_transition_valid(source, target) == ((source, target) in VALID)


@pytest.fixture
def managers(root):
    """``make(transactional_id=None) -> TransactionManager`` on ``root``; closed at the end."""
    pool = WriterPool.for_root(root)
    made = []

    def make(transactional_id="tx"):
        manager = TransactionManager(root, pool, transactional_id=transactional_id, enable_idempotence=True,
                                     transaction_timeout_ms=60_000, transaction_state_partitions=1)
        made.append(manager)
        return manager
    yield make
    for manager in made:
        if manager.state is not State.CLOSED:
            manager.close()
    pool.release()


def test_an_illegal_move_is_refused_and_leaves_the_state_as_it_was(managers):
    manager = managers()
    with pytest.raises(ClientStateError, match="no transaction in progress"):
        manager.end(commit=True)
    manager.begin()
    with pytest.raises(ClientStateError, match="already in progress"):
        manager.begin()
    assert manager.state is State.IN_TRANSACTION
    with pytest.raises(ClientStateError, match="from in transaction to in transaction"):
        manager._transition(State.IN_TRANSACTION)


def test_a_failed_send_leaves_the_transaction_abortable_only(root, managers):
    make_topic(root, "t", 1)
    manager = managers()
    manager.begin()
    manager.maybe_add_partitions([("t", 0)])
    manager.fail(OSError("disk full"))
    manager.fail(OSError("a second failure"))
    assert manager.state is State.ABORTABLE_ERROR and str(manager.last_error) == "disk full"
    with pytest.raises(TransactionAbortableError, match="disk full"):
        manager.end(commit=True)
    with pytest.raises(TransactionAbortableError):
        manager.maybe_add_partitions([("t", 1)])
    manager.end(commit=False)
    assert manager.state is State.READY and manager.last_error is None
    manager.begin()  # a new transaction after the abort


def test_a_newer_instance_fences_the_older_for_good(root, managers):
    make_topic(root, "t", 1)
    old = managers()
    old.begin()
    new = managers()
    assert new.producer_epoch == old.producer_epoch + 1
    with pytest.raises(ProducerFencedError):
        old.maybe_add_partitions([("t", 0)])
    assert old.state is State.FATAL_ERROR
    with pytest.raises(ProducerFencedError):
        old.begin()
    with pytest.raises(ProducerFencedError):
        old.end(commit=False)
    old.close()
    with pytest.raises(ClientStateError, match="closed"):
        old.check_usable()


def test_sequences_wrap_at_the_modulus(managers):
    manager = managers(transactional_id=None)
    tp = ("t", 0)
    assert manager.sequence(tp) == 0
    manager.advance(tp, SEQUENCE_MODULUS - 2)
    manager.advance(tp, 5)
    assert manager.sequence(tp) == 3


def test_a_producer_without_idempotence_numbers_nothing(root):
    pool = WriterPool.for_root(root)
    try:
        manager = TransactionManager(root, pool, transactional_id=None, enable_idempotence=False,
                                     transaction_timeout_ms=60_000)
        manager.advance(("t", 0), 10)
        assert manager.producer_id == -1 and manager.sequence(("t", 0)) == -1
        with pytest.raises(ClientStateError, match="no transactional_id"):
            manager.begin()
    finally:
        pool.release()


def test_a_producer_cannot_write_to_a_partition_of_its_last_transaction_once_it_ended(root):
    make_topic(root, "t", 1)
    with Producer(root, transactional_id="tx") as producer:
        producer.begin_transaction()
        producer.send("t", b"in", partition=0).get(5)
        producer.commit_transaction()
        with pytest.raises(ClientStateError, match="outside a transaction"):
            producer.send("t", b"after", partition=0)
