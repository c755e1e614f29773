"""DescribeCluster: the cluster id, this node as the one broker and the controller, at the
address clients are told to use (as Metadata answers), as Kafka's
``KafkaApis.handleDescribeClusterRequest`` answers. No authorizer runs, so the cluster's
authorized operations are not reported. Cost: O(1), on the event loop.
"""

from __future__ import annotations

from kafka.protocol.admin.cluster import DescribeClusterResponse

from pylog.serve.error_codes import NONE

_Broker = DescribeClusterResponse.DescribeClusterBroker


def handle_describe_cluster(apis, request) -> DescribeClusterResponse:
    """One broker, not fenced, which is also the controller; the endpoint type asked for
    (brokers or controllers: this node is both)."""
    node = apis.config.node_id
    broker = _Broker(broker_id=node, host=apis.advertised_host, port=apis.advertised_port, rack=None,
                     is_fenced=False)
    return DescribeClusterResponse(throttle_time_ms=0, error_code=NONE, error_message=None,
                                   endpoint_type=getattr(request.body, "endpoint_type", 1),
                                   cluster_id=apis.config.cluster_id, controller_id=node, brokers=[broker])
