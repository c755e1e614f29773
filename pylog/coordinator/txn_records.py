"""The records of ``__transaction_state``, the transaction coordinator's topic
(docs/format/consumer-offsets.md, "Transaction log"): one record type, 0, keyed by the
transactional id, whose value is the transaction's current metadata."""

from __future__ import annotations

from pylog.coordinator.records import RecordSet, RecordType
from pylog.coordinator.schema import Array, Field, Message, Struct

TRANSACTION_LOG_KEY = Message("TransactionLogKey", "0", "none", (Field("transactionalId", "string"),))
TRANSACTION_LOG_VALUE = Message("TransactionLogValue", "0-1", "1+", (
    Field("producerId", "int64"),
    Field("previousProducerId", "int64", "1+", default=-1, tag=0, tagged="1+"),
    Field("nextProducerId", "int64", "1+", default=-1, tag=1, tagged="1+"),
    Field("producerEpoch", "int16"),
    Field("transactionTimeoutMs", "int32"),
    Field("transactionStatus", "int8"),
    Field("transactionPartitions", Array(Struct((
        Field("topic", "string"),
        Field("partitionIds", Array("int32")),
    ))), nullable="0+"),
    Field("transactionLastUpdateTimestampMs", "int64"),
    Field("transactionStartTimestampMs", "int64"),
    Field("clientTransactionVersion", "int16", "1+", default=0, tag=2, tagged="1+"),
))

#: TransactionLogValue.transactionStatus -> the coordinator's state name
TRANSACTION_STATES = {0: "Empty", 1: "Ongoing", 2: "PrepareCommit", 3: "PrepareAbort", 4: "CompleteCommit",
                      5: "CompleteAbort", 6: "Dead", 7: "PrepareEpochFence"}

TRANSACTION_LOG = 0
TXN_RECORDS = RecordSet([RecordType(TRANSACTION_LOG, TRANSACTION_LOG_KEY, TRANSACTION_LOG_VALUE)])
