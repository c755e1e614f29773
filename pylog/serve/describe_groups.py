"""ListGroups and DescribeGroups: the log dir's consumer groups, as ``pylog consumer-groups
--list`` and ``--describe --members`` show them. A group is listed once it has committed
offsets or a completed generation (a GroupMetadata record); its state and members are
those of its state file (pylog/coordinator/group_membership.py), with the members whose
lease holds. Cost: the ``__consumer_offsets`` partitions' new records, then one small
file read per group, in the disk thread pool.
"""

from __future__ import annotations

from kafka.protocol.admin import DescribeGroupsResponse, ListGroupsResponse

from pylog.coordinator.group_coordinator import consumer_assignment, consumer_subscription
from pylog.coordinator.group_membership import read_group_file
from pylog.coordinator.offsets_records import CONSUMER_PROTOCOL_TYPE
from pylog.errors import PylogError
from pylog.serve.error_codes import GROUP_ID_NOT_FOUND, INVALID_GROUP_ID, NONE, error_code

_Group = DescribeGroupsResponse.DescribedGroup
_Member = _Group.DescribedGroupMember
#: the first DescribeGroups version that answers GROUP_ID_NOT_FOUND for an unknown group (KIP-1043)
_NOT_FOUND_VERSION = 6


async def handle_list_groups(apis, request) -> ListGroupsResponse:
    """Every group, with its state; ``states_filter`` (v4+) keeps those in the states named,
    ``types_filter`` (v5+) those of the types named (all are ``classic``)."""
    body = request.body
    coordinator = await apis.group_coordinator()
    try:
        listed = await apis.run_blocking(_list, coordinator)
    except PylogError as e:
        return ListGroupsResponse(throttle_time_ms=0, error_code=error_code(e), groups=[])
    states = {s.lower() for s in getattr(body, "states_filter", None) or ()}
    types = {t.lower() for t in getattr(body, "types_filter", None) or ()}
    groups = [ListGroupsResponse.ListedGroup(group_id=g, protocol_type=CONSUMER_PROTOCOL_TYPE, group_state=state,
                                             group_type="classic")
              for g, state in listed if (not states or state.lower() in states) and (not types or "classic" in types)]
    return ListGroupsResponse(throttle_time_ms=0, error_code=NONE, groups=groups)


def _list(coordinator) -> list[tuple[str, str]]:
    return [(g, _state_name(read_group_file(coordinator.root, g))) for g in coordinator.group_ids()]


def _state_name(file_state: dict | None) -> str:
    return "Empty" if file_state is None or not file_state["members"] else file_state["state"]


async def handle_describe_groups(apis, request) -> DescribeGroupsResponse:
    """Each group's state, protocol and live members with their subscriptions and
    assignments; an unknown group is ``Dead`` (``GROUP_ID_NOT_FOUND`` from v6), an empty
    group id ``INVALID_GROUP_ID``."""
    coordinator = await apis.group_coordinator()
    groups = []
    for group_id in request.body.groups or ():
        try:
            groups.append(await apis.run_blocking(_describe, apis, coordinator, group_id, request.api_version))
        except PylogError as e:
            groups.append(_Group(error_code=error_code(e), group_id=group_id, group_state="Dead", protocol_type="",
                                 protocol_data="", members=[]))
    return DescribeGroupsResponse(throttle_time_ms=0, groups=groups)


def _describe(apis, coordinator, group_id: str, version: int):
    if not group_id:
        return _Group(error_code=INVALID_GROUP_ID, group_id=group_id, group_state="Dead", protocol_type="",
                      protocol_data="", members=[])
    file_state = read_group_file(coordinator.root, group_id)
    if file_state is None and group_id not in coordinator.group_ids():
        error = GROUP_ID_NOT_FOUND if version >= _NOT_FOUND_VERSION else NONE
        return _Group(error_code=error, group_id=group_id, group_state="Dead", protocol_type="", protocol_data="",
                      members=[])
    members = []
    if file_state is not None:
        known = apis.groups.metadata.get(group_id, {})
        for m in sorted(coordinator.membership(group_id).live_members(file_state)):
            info = file_state["members"][m]
            members.append(_Member(
                member_id=m, group_instance_id=None, client_id=info["client_id"], client_host=info["client_host"],
                member_metadata=known.get(m, {}).get(file_state["protocol"]) or consumer_subscription(info["topics"]),
                member_assignment=consumer_assignment(tuple(tp) for tp in file_state["assignment"].get(m, []))))
    protocol = (file_state or {}).get("protocol") or ""
    return _Group(error_code=NONE, group_id=group_id, group_state=_state_name(file_state) if members else "Empty",
                  protocol_type=CONSUMER_PROTOCOL_TYPE, protocol_data=protocol, members=members)
