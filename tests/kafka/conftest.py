"""Fixtures for the tests that take Apache Kafka itself as the judge (tests/kafka/).

Every test here carries the ``kafka`` marker. Without ``java`` or ``mvn``, or when Maven cannot
fetch Kafka's jars (offline), they skip, naming why; with the environment variable ``CI`` set
they fail instead. A broker that cannot start fails them everywhere: that is no missing tool. One broker serves the whole session (``kafka_broker``); a test that stops it starts
it again, and a module that finds it stopped gets it started before its first test. It has
Kafka's default of 50 ``__consumer_offsets`` partitions, which pylog's group coordinator
assumes (docs/faq.md, "internal topics"), so that pylog can commit into its log dir; a broker
start costs ~15 s of a busy machine, so a test takes a broker of its own only for settings the
session's cannot have.

- ``kafka_jars``: interop/kafka/target/lib, prepared first when missing or stale.
- ``kafka_tool(main_class, *args, check=True, timeout_s=120)``: runs a Java main with those jars.
- ``kafka_broker``: the session's ``tests.kafka.broker.KafkaBroker``.
- ``kafka_broker_factory(**server_properties)``: brokers of a test's own, stopped after it;
  ``kafka_module_broker_factory`` the same for a module's fixtures, stopped after the module.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.kafka import broker as kafka

_KAFKA_DIR = Path(__file__).resolve().parent
_session_broker: kafka.KafkaBroker | None = None
#: The session broker's settings besides ``broker.DEFAULT_SERVER_PROPERTIES``.
SESSION_SERVER_PROPERTIES = {"offsets_topic_num_partitions": 50}


def _unavailable(reason: str):
    """Skip, or fail when running in CI, where the judge must be present."""
    if os.environ.get("CI"):
        pytest.fail(f"CI: {reason}", pytrace=False)
    pytest.skip(reason)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _KAFKA_DIR in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.kafka)


@pytest.fixture(scope="session")
def kafka_jars() -> Path:
    missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
    if missing:
        _unavailable(f"{' and '.join(missing)} not on PATH: the Kafka interoperability tests need "
                     f"Java 17+ and Maven (interop/kafka/prepare)")
    try:
        kafka.prepare()
    except (RuntimeError, OSError) as e:
        _unavailable(f"cannot prepare Kafka's jars: {e}")
    return kafka.LIB


@pytest.fixture(scope="session")
def kafka_tool(kafka_jars):
    """``kafka_tool(main_class, *args, check=True, timeout_s=120, input=None)``."""
    return kafka.run_java


def _start(broker: kafka.KafkaBroker) -> None:
    try:
        broker.start()
    except AssertionError as e:
        broker.stop(kill=True)
        pytest.fail(f"the Kafka broker cannot start: {e}", pytrace=False)


@pytest.fixture(scope="session")
def kafka_broker(kafka_jars, tmp_path_factory) -> kafka.KafkaBroker:
    global _session_broker
    broker = kafka.KafkaBroker(tmp_path_factory.mktemp("kafka-broker"), **SESSION_SERVER_PROPERTIES)
    _start(broker)
    _session_broker = broker
    yield broker
    _session_broker = None
    broker.stop()


@pytest.fixture(scope="module", autouse=True)
def _kafka_broker_running(request):
    """A module whose tests use the session broker finds it running, whatever the last module did."""
    uses_broker = any("kafka_broker" in getattr(item, "fixturenames", ())
                      for item in request.session.items if item.module is request.module)
    if uses_broker and _session_broker is not None and not _session_broker.running:
        _session_broker.start()


def _broker_factory(root: Path):
    """A ``make(**server_properties)`` starting brokers under ``root``, and their list."""
    brokers: list[kafka.KafkaBroker] = []

    def make(**server_properties) -> kafka.KafkaBroker:
        broker = kafka.KafkaBroker(root / f"broker-{len(brokers)}", **server_properties)
        brokers.append(broker)
        _start(broker)
        return broker

    return make, brokers


@pytest.fixture
def kafka_broker_factory(kafka_jars, tmp_path):
    """``kafka_broker_factory(**server_properties)`` starts a broker of the test's own
    (underscores in names stand for dots: ``log_segment_bytes=1024``)."""
    make, brokers = _broker_factory(tmp_path)
    yield make
    for broker in brokers:
        broker.stop(kill=True)


@pytest.fixture(scope="module")
def kafka_module_broker_factory(kafka_jars, tmp_path_factory):
    """``kafka_broker_factory`` for module-scoped fixtures: brokers stopped after the module."""
    make, brokers = _broker_factory(tmp_path_factory.mktemp("kafka-module-brokers"))
    yield make
    for broker in brokers:
        broker.stop(kill=True)
