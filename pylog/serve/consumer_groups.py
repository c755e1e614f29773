"""JoinGroup, SyncGroup, Heartbeat and LeaveGroup: Kafka's classic consumer-group protocol
on pylog's group coordinator (:class:`~pylog.coordinator.group_membership.GroupMembership`),
as Kafka's broker serves them from its ``GroupCoordinator``.

A member joins with its subscription (the consumer protocol's bytes, for every assignor it
offers). The group's state, generations and leases are the coordinator's; the server holds
one lease for all its clients, and a client's liveness is its heartbeats within
``session_timeout_ms``. A JoinGroup is answered once every known member rejoined, or the
late ones were removed after their ``rebalance_timeout_ms`` (or session timeout): it waits
on :class:`~pylog.serve.purgatory.GroupNotifier` (every join, heartbeat and leave of the group wakes it), and on a
timer at the next member's deadline, never blocking the event loop.

The assignment is the coordinator's, computed with the chosen protocol's assignor
(``range``, ``roundrobin`` or ``cooperative-sticky``, the first all members offer): the
leader is told the members, as Kafka tells it, but the assignment its SyncGroup sends is
not used. Every state change is one small file rewrite under the group's mutex, run in
the disk thread pool.
"""

from __future__ import annotations

from kafka.protocol.consumer import HeartbeatResponse, JoinGroupResponse, LeaveGroupResponse, SyncGroupResponse

from pylog.coordinator.assignors import ASSIGNORS
from pylog.coordinator.group_coordinator import MAX_STRING_BYTES, consumer_assignment, consumer_subscription
from pylog.coordinator.group_membership import read_group_file
from pylog.coordinator.offsets_records import CONSUMER_PROTOCOL_SUBSCRIPTION, CONSUMER_PROTOCOL_TYPE
from pylog.coordinator.schema import decode
from pylog.errors import PylogError
from pylog.record.encode import now_ms
from pylog.serve.error_codes import (
    ILLEGAL_GENERATION, INCONSISTENT_GROUP_PROTOCOL, INVALID_GROUP_ID, INVALID_SESSION_TIMEOUT, NONE,
    REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID, error_code,
)
from pylog.serve.purgatory import wait_for

#: the newest consumer-protocol subscription version read; newer ones are read as it, as Kafka does
_SUBSCRIPTION_VERSION = 3


def _subscription(metadata: bytes) -> tuple[list, list]:
    """The topics and owned partitions of a consumer-protocol subscription."""
    version = min(int.from_bytes(metadata[:2], "big", signed=True), _SUBSCRIPTION_VERSION)
    value = decode(CONSUMER_PROTOCOL_SUBSCRIPTION, max(version, 0), metadata[2:])
    owned = [(t["topic"], p) for t in value.get("ownedPartitions") or () for p in t["partitions"]]
    return list(value["topics"]), owned


def fits_a_record(text: str) -> bool:
    """Whether ``text`` (a group or member id) fits a coordinator record's int16-length
    string: a flexible request version may carry a longer one."""
    return len(text.encode()) <= MAX_STRING_BYTES


def _join_error(member_id: str, error: int) -> JoinGroupResponse:
    return JoinGroupResponse(throttle_time_ms=0, error_code=error, generation_id=-1, protocol_name="",
                             leader="", member_id=member_id, members=[])


async def handle_join_group(apis, request) -> JoinGroupResponse:
    """Join (or rejoin) and wait for the rebalance to complete; the generation, the
    protocol, the leader, and for the leader the members' subscriptions."""
    body = request.body
    if not body.group_id or not fits_a_record(body.group_id):
        return _join_error(body.member_id, INVALID_GROUP_ID)
    if not fits_a_record(body.member_id):  # no member has such an id
        return _join_error(body.member_id, UNKNOWN_MEMBER_ID)
    config = apis.config
    if not config.group_min_session_timeout_ms <= body.session_timeout_ms <= config.group_max_session_timeout_ms:
        return _join_error(body.member_id, INVALID_SESSION_TIMEOUT)
    protocols = {p.name: bytes(p.metadata) for p in body.protocols or () if p.name in ASSIGNORS}
    if body.protocol_type != CONSUMER_PROTOCOL_TYPE or not protocols:
        return _join_error(body.member_id, INCONSISTENT_GROUP_PROTOCOL)
    try:
        topics, owned = _subscription(next(iter(protocols.values())))
    except PylogError:
        return _join_error(body.member_id, INCONSISTENT_GROUP_PROTOCOL)
    rebalance_timeout_ms = body.rebalance_timeout_ms if body.rebalance_timeout_ms > 0 else body.session_timeout_ms
    membership = await apis.group_membership(body.group_id)

    def join(member_id):
        return membership.join(member_id, topics=topics, assignors=list(protocols), owned=owned,
                               session_timeout_ms=body.session_timeout_ms,
                               rebalance_timeout_ms=rebalance_timeout_ms, client_id=request.header.client_id or "")
    try:
        member_id = await apis.run_blocking(join, body.member_id or None)
        apis.groups.metadata.setdefault(body.group_id, {})[member_id] = protocols
        apis.groups.notify(body.group_id)
        state = await _wait_for_rebalance(apis, membership, body.group_id, member_id, join)
    except PylogError as e:
        return _join_error(body.member_id, error_code(e))
    if state is None:
        return _join_error(member_id, UNKNOWN_MEMBER_ID)
    known = apis.groups.metadata.get(body.group_id, {})
    for gone in set(known) - set(state["members"]):  # removed at its session or rebalance timeout
        del known[gone]
    members = []
    if state["leader"] == member_id:  # a member that joined elsewhere is told by its topics
        members = [JoinGroupResponse.JoinGroupResponseMember(
            member_id=m, metadata=known.get(m, {}).get(state["protocol"]) or consumer_subscription(info["topics"]))
            for m, info in sorted(state["members"].items())]
    return JoinGroupResponse(throttle_time_ms=0, error_code=NONE, generation_id=state["generation"],
                             protocol_type=CONSUMER_PROTOCOL_TYPE, protocol_name=state["protocol"],
                             leader=state["leader"], member_id=member_id, members=members)


async def _wait_for_rebalance(apis, membership, group_id: str, member_id: str, join) -> dict | None:
    """The group's state once it is Stable with ``member_id`` in it (None if the member was
    removed). Wakes on the group's changes, and at the earliest deadline of a member not
    rejoined (or of this member's own lease, renewed then), where a heartbeat of this member
    removes the late ones and completes the rebalance."""
    while True:
        waiter = apis.groups.waiter(group_id)
        state = await apis.run_blocking(membership.read)
        me = state["members"].get(member_id)
        if me is None:
            return None
        if state["state"] == "Stable":
            return state
        if not me["joined"]:  # a newer rebalance began before this one was answered: join it too
            await apis.run_blocking(join, member_id)
            continue
        due_ms = min([me["heartbeat_ms"] + me["session_timeout_ms"] // 2] + [
            min(state["rebalance_started_ms"] + i["rebalance_timeout_ms"], i["heartbeat_ms"] + i["session_timeout_ms"])
            for i in state["members"].values() if not i["joined"]])
        if not await wait_for(waiter, max(due_ms - now_ms(), 0) / 1000 + 0.01):
            await apis.run_blocking(membership.heartbeat, member_id)
            apis.groups.notify(group_id)


async def handle_sync_group(apis, request) -> SyncGroupResponse:
    """The member's assignment of the current generation (the consumer protocol's bytes)."""
    body = request.body
    try:
        error = INVALID_GROUP_ID
        if body.group_id:
            membership = await _joined_membership(apis, body.group_id)
            state = await apis.run_blocking(membership.read) if membership is not None else {"members": {}}
            error = _member_error(state, body.member_id, body.generation_id)
    except PylogError as e:
        error = error_code(e)
    if error != NONE:
        return SyncGroupResponse(throttle_time_ms=0, error_code=error, assignment=b"")
    assignment = consumer_assignment(tuple(tp) for tp in state["assignment"].get(body.member_id, []))
    return SyncGroupResponse(throttle_time_ms=0, error_code=NONE, protocol_type=CONSUMER_PROTOCOL_TYPE,
                             protocol_name=state["protocol"], assignment=assignment)


async def _joined_membership(apis, group_id: str):
    """The group's :class:`~pylog.coordinator.group_membership.GroupMembership`, or None
    for a group never joined (no state file), whose members are all unknown: a request
    naming it takes nothing (a membership is kept for the life of the server). Cost: one small file
    read, in the disk thread pool."""
    coordinator = await apis.group_coordinator()
    if await apis.run_blocking(read_group_file, coordinator.root, group_id) is None:
        return None
    return coordinator.membership(group_id)


def _member_error(state: dict, member_id: str, generation: int) -> int:
    if member_id not in state["members"]:
        return UNKNOWN_MEMBER_ID
    if state["state"] != "Stable":
        return REBALANCE_IN_PROGRESS
    if generation != state["generation"]:
        return ILLEGAL_GENERATION
    return NONE


async def handle_heartbeat(apis, request) -> HeartbeatResponse:
    """Renew the member's lease; ``REBALANCE_IN_PROGRESS`` tells it to rejoin."""
    body = request.body
    if not body.group_id:
        return HeartbeatResponse(throttle_time_ms=0, error_code=INVALID_GROUP_ID)
    try:
        membership = await _joined_membership(apis, body.group_id)
        if membership is None:
            return HeartbeatResponse(throttle_time_ms=0, error_code=UNKNOWN_MEMBER_ID)
        state = await apis.run_blocking(membership.heartbeat, body.member_id)
    except PylogError as e:
        return HeartbeatResponse(throttle_time_ms=0, error_code=error_code(e))
    apis.groups.notify(body.group_id)
    return HeartbeatResponse(throttle_time_ms=0, error_code=_member_error(state, body.member_id, body.generation_id))


async def handle_leave_group(apis, request) -> LeaveGroupResponse:
    """Remove the member (v0-2) or members (v3+); the others rebalance."""
    body = request.body
    members = [body.member_id] if request.api_version < 3 else [m.member_id for m in body.members or ()]
    if not body.group_id:
        return LeaveGroupResponse(throttle_time_ms=0, error_code=INVALID_GROUP_ID, members=[])
    try:
        membership = await _joined_membership(apis, body.group_id)
    except PylogError as e:
        return LeaveGroupResponse(throttle_time_ms=0, error_code=error_code(e), members=[])
    answers = []
    for member_id in members:
        try:
            state = await apis.run_blocking(membership.read) if membership is not None else {"members": {}}
            error = NONE if member_id in state["members"] else UNKNOWN_MEMBER_ID
            if error == NONE:
                await apis.run_blocking(membership.leave, member_id)
                apis.groups.metadata.get(body.group_id, {}).pop(member_id, None)
        except PylogError as e:
            error = error_code(e)
        answers.append(LeaveGroupResponse.MemberResponse(member_id=member_id, group_instance_id=None,
                                                         error_code=error))
    apis.groups.notify(body.group_id)
    if request.api_version < 3:
        return LeaveGroupResponse(throttle_time_ms=0, error_code=answers[0].error_code)
    return LeaveGroupResponse(throttle_time_ms=0, error_code=NONE, members=answers)
