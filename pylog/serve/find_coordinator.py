"""FindCoordinator: this server is the coordinator of every group and every transactional
id (key types 0 and 1), so it answers its own address for each key, in the single-key
(v0-3) and batched (v4+) forms. Cost: none beyond the answer."""

from __future__ import annotations

from kafka.protocol.metadata import FindCoordinatorResponse

from pylog.serve.error_codes import NONE

#: the first version that asks for several keys at once
_BATCHED_VERSION = 4


def handle_find_coordinator(apis, request) -> FindCoordinatorResponse:
    """This node, for each key asked for."""
    node, host, port = apis.config.node_id, apis.advertised_host, apis.advertised_port
    if request.api_version < _BATCHED_VERSION:
        return FindCoordinatorResponse(throttle_time_ms=0, error_code=NONE, error_message=None, node_id=node,
                                       host=host, port=port)
    coordinators = [FindCoordinatorResponse.Coordinator(key=key, node_id=node, host=host, port=port,
                                                        error_code=NONE, error_message=None)
                    for key in request.body.coordinator_keys or ()]
    return FindCoordinatorResponse(throttle_time_ms=0, coordinators=coordinators)
