"""``KafkaApis``: the table of the APIs served, each API's message class and handler loaded
by its first request, so a new server answers before it has loaded what no client asked for."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from pylog.serve.kafka_apis import SUPPORTED_VERSIONS, load
from tests.serve.conftest import ROOT_DIR


@pytest.mark.parametrize("api_key", sorted(SUPPORTED_VERSIONS), ids=lambda k: k.name)
def test_every_api_served_names_its_request_class_and_handler(api_key):
    api = SUPPORTED_VERSIONS[api_key]
    request_class = load(api.request)
    assert request_class.API_KEY == api_key
    assert request_class.min_version <= api.low <= api.high <= request_class.max_version
    assert callable(load(api.handler))


#: modules a first ApiVersions does not need: kafka-python's client, and the other APIs'
WATCHED = ("kafka.admin", "kafka.consumer", "kafka.producer", "kafka.protocol.admin",
           "pylog.serve.produce", "pylog.serve.fetch", "pylog.serve.consumer_groups", "pylog.serve.describe_configs")

SERVE_AS_THE_COMMAND_DOES = f"""
import json, socket, sys
from pylog.cli.serve import defer_package_init
defer_package_init("kafka")
from pylog.serve import Server
from kafka.protocol.metadata import ApiVersionsRequest

def loaded():
    return sorted(m for m in {WATCHED!r} if m in sys.modules)

with Server(sys.argv[1], listen=("127.0.0.1", 0)) as server:
    request = ApiVersionsRequest(client_software_name="t", client_software_version="1")
    request.API_VERSION = 3
    request.with_header(correlation_id=7, client_id="t")
    with socket.create_connection(server.address, timeout=30) as sock:
        sock.sendall(bytes(request.encode(header=True, framed=True)))
        answered = len(sock.recv(4)) == 4
    print(json.dumps({{"answered": answered, "loaded": loaded()}}))
    from kafka import KafkaProducer  # kafka-python's own package completes on its first use
    producer = KafkaProducer(bootstrap_servers=server.bootstrap_servers)
    offset = producer.send("events", b"v").get(timeout=60).offset
    producer.close()
    print(json.dumps({{"offset": offset, "loaded": loaded()}}))
"""


def test_the_first_api_versions_is_answered_before_the_other_apis_load(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    result = subprocess.run([sys.executable, "-c", SERVE_AS_THE_COMMAND_DOES, str(tmp_path / "data")],
                            capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    first, after_produce = (json.loads(line) for line in result.stdout.splitlines())
    assert first == {"answered": True, "loaded": []}
    assert after_produce["offset"] == 0
    assert {"kafka.producer", "pylog.serve.produce"} <= set(after_produce["loaded"])
    assert "pylog.serve.describe_configs" not in after_produce["loaded"]  # no client asked for configs
