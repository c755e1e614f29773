"""FindCoordinator: this server is the coordinator of every group and every transactional
id (key types 0 and 1), so it answers its own address for each key, in the single-key
(v0-3) and batched (v4+) forms; another key type is ``INVALID_REQUEST``, as Kafka answers
it. Cost: none beyond the answer."""

from __future__ import annotations

from kafka.protocol.metadata import FindCoordinatorResponse

from pylog.serve.error_codes import INVALID_REQUEST, NONE

#: the first version that asks for several keys at once
_BATCHED_VERSION = 4
#: the key types served: a group id (0), a transactional id (1)
_KEY_TYPES = (0, 1)


def handle_find_coordinator(apis, request) -> FindCoordinatorResponse:
    """This node, for each key asked for."""
    node, host, port = apis.config.node_id, apis.advertised_host, apis.advertised_port
    if request.body.key_type not in _KEY_TYPES:
        node, host, port, error = -1, "", -1, INVALID_REQUEST
        message = f"unknown coordinator key type {request.body.key_type}"
    else:
        error, message = NONE, None
    if request.api_version < _BATCHED_VERSION:
        return FindCoordinatorResponse(throttle_time_ms=0, error_code=error, error_message=message, node_id=node,
                                       host=host, port=port)
    coordinators = [FindCoordinatorResponse.Coordinator(key=key, node_id=node, host=host, port=port,
                                                        error_code=error, error_message=message)
                    for key in request.body.coordinator_keys or ()]
    return FindCoordinatorResponse(throttle_time_ms=0, coordinators=coordinators)
