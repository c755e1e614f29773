"""InitProducerId for idempotent producers, as Kafka's ``ProducerIdManager`` hands out ids:
each call gets a new producer id, never reused in this log dir
(:func:`pylog.logdir.producer_ids.allocate_producer_id`, shared with pylog's own
``Producer``), at epoch 0; the partitions' producer state then checks its sequences.
A transactional id's goes to the transaction coordinator (pylog/serve/transactions.py).
Cost: one small durable write, in the disk thread pool."""

from __future__ import annotations

from kafka.protocol.producer import InitProducerIdResponse

from pylog.errors import PylogError
from pylog.logdir.producer_ids import allocate_producer_id
from pylog.serve.error_codes import NONE, error_code
from pylog.serve.transactions import handle_init_transactional_producer_id


async def handle_init_producer_id(apis, request) -> InitProducerIdResponse:
    """A new producer id at epoch 0 (a transactional id's at its next epoch), or the error
    that refused one."""
    if request.body.transactional_id is not None:
        return await handle_init_transactional_producer_id(apis, request)
    try:
        producer_id = await apis.run_blocking(allocate_producer_id, apis.manager.root)
    except PylogError as e:
        return InitProducerIdResponse(throttle_time_ms=0, error_code=error_code(e), producer_id=-1,
                                      producer_epoch=-1)
    return InitProducerIdResponse(throttle_time_ms=0, error_code=NONE, producer_id=producer_id, producer_epoch=0)
