"""aiokafka (asyncio, its own protocol code) against ``pylog serve``: its admin client creates a
topic, its producer writes keys, headers and gzip batches, and two consumers of one group split
the partitions, read every record once and commit; what they wrote and committed is what
pylog's ``Log`` and ``pylog consumer-groups`` read from the files."""

from __future__ import annotations

import asyncio

import pytest

from pylog.manager import LogManager
from tests.serve.conftest import pylog_cli

aiokafka = pytest.importorskip("aiokafka", reason="aiokafka is not installed (extra 'dev')")
from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # noqa: E402

TOPIC, PARTITIONS, RECORDS = "async", 4, 200


async def _create_topic(bootstrap: str) -> list[str]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)])
        return await admin.list_topics()
    finally:
        await admin.close()


async def _produce(bootstrap: str) -> list:
    producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type="gzip", acks="all")
    await producer.start()
    try:
        sent = [await producer.send_and_wait(TOPIC, b"value %d" % i, key=b"key %d" % i,
                                             headers=[("n", b"%d" % i)]) for i in range(RECORDS)]
        return [(m.partition, m.offset) for m in sent]
    finally:
        await producer.stop()


async def _consume_in_group(bootstrap: str) -> list[tuple[int, int, bytes, bytes]]:
    """Two members of one group, once both hold partitions, read until every record is in,
    then commit and leave."""
    members = [aiokafka.AIOKafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id="async-group",
                                         auto_offset_reset="earliest", enable_auto_commit=False)
               for _ in range(2)]
    for member in members:
        await member.start()
    got: list = []
    try:
        deadline = asyncio.get_running_loop().time() + 60
        while not all(member.assignment() for member in members):  # the group's second rebalance done
            assert asyncio.get_running_loop().time() < deadline, "the two members never both held partitions"
            await asyncio.sleep(0.01)

        async def read(member):
            while len(got) < RECORDS:
                batches = await member.getmany(timeout_ms=500)
                got.extend((m.partition, m.offset, m.key, m.value) for msgs in batches.values() for m in msgs)
        await asyncio.wait_for(asyncio.gather(*(read(m) for m in members)), 120)
        for member in members:
            await member.commit()
    finally:
        for member in members:
            await member.stop()
    return got


def test_aiokafkas_admin_producer_and_group_consumers(pylog_server):
    bootstrap = pylog_server.bootstrap_servers
    assert TOPIC in asyncio.run(_create_topic(bootstrap))
    acked = asyncio.run(_produce(bootstrap))
    got = asyncio.run(_consume_in_group(bootstrap))

    assert sorted((p, o) for p, o, _, _ in got) == sorted(acked)  # every record once
    with LogManager(pylog_server.root, read_only=True) as manager:
        assert len(manager.partitions(TOPIC)) == PARTITIONS
        in_files = {(p, r.offset): (r.key, r.value, r.headers) for p in range(PARTITIONS)
                    for r in manager.log(TOPIC, p).records()}
    assert {(p, o): (k, v) for p, o, k, v in got} == {at: (k, v) for at, (k, v, _) in in_files.items()}
    assert all(tuple(h) == (("n", v.removeprefix(b"value ")),) for k, v, h in in_files.values())

    pylog_server.stop()
    described = pylog_cli("consumer-groups", pylog_server.root, "--describe", "--group", "async-group")
    lags = [line.split()[5] for line in described.stdout.decode().splitlines() if line.startswith("async-group")]
    assert len(lags) == PARTITIONS and set(lags) == {"0"}
