"""``pylog consumer-groups ROOT``: Kafka's ``kafka-consumer-groups.sh`` on a log dir:
``--list``, ``--describe --group G`` (per partition: current offset, log end offset,
lag, member) and ``--reset-offsets`` (``--to-earliest``, ``--to-latest``,
``--to-offset N``, ``--shift-by N``, ``--to-datetime``; ``--dry-run`` or ``--execute``),
with Kafka's columns. Groups are read from ``__consumer_offsets`` (pylog's or a broker's)
and, for live members, from the group files pylog's consumers keep."""

from __future__ import annotations

import datetime
import os

from pylog.errors import GroupNotEmptyError, InvalidArgumentError, UnknownTopicError
from pylog.partition_dir import partition_dir_name


def add_parser(sub) -> None:
    p = sub.add_parser("consumer-groups", help="list, describe and reset consumer groups "
                                               "(kafka-consumer-groups compatible)")
    p.add_argument("root", help="the log dir")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="list the groups")
    action.add_argument("--describe", action="store_true", help="offsets, lag and members of --group")
    action.add_argument("--reset-offsets", action="store_true", help="reset the offsets of an inactive --group")
    action.add_argument("--delete", action="store_true", help="delete an inactive --group's offsets and metadata")
    p.add_argument("--group", action="append", default=[], help="the group (repeat for several)")
    p.add_argument("--all-groups", action="store_true", help="every group of the log dir")
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("--topic", action="append", default=[], help="TOPIC or TOPIC:0,1 (reset only)")
    scope.add_argument("--all-topics", action="store_true", help="every partition the group has an offset for")
    to = p.add_mutually_exclusive_group()
    to.add_argument("--to-earliest", action="store_true", help="reset to the log start offset")
    to.add_argument("--to-latest", action="store_true", help="reset to the log end offset")
    to.add_argument("--to-current", action="store_true", help="keep the committed offset (the log end without one)")
    to.add_argument("--to-offset", type=int, help="reset to this offset")
    to.add_argument("--shift-by", type=int, help="move the committed offset by N (negative: back)")
    to.add_argument("--to-datetime", help="YYYY-MM-DDTHH:mm:SS.sss (UTC unless an offset is given)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="print the new offsets only (the default)")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    p.set_defaults(run=run)


def run(args) -> int:
    from pylog.coordinator.offsets_reader import read_group_state
    state = read_group_state(args.root)
    groups = sorted(set(state.offsets) | set(state.groups))
    if args.list:
        for g in groups:
            print(g)
        return 0
    targets = groups if args.all_groups else args.group
    if not targets:
        raise InvalidArgumentError("give --group G (or --all-groups)")
    if args.describe:
        for g in targets:
            describe(args.root, g, state)
        return 0
    if args.delete:
        from pylog.coordinator.group_coordinator import GroupCoordinator
        coordinator = GroupCoordinator.for_root(args.root)
        try:
            for g in targets:
                coordinator.delete_group(g)
                print(f"Deletion of requested consumer groups ('{g}') was successful.")
        finally:
            coordinator.release()
        return 0
    for g in targets:
        reset_offsets(args, g, state)
    return 0


def _live_members(root: str, group: str) -> dict:
    """``{member_id: (client_id, host, [(topic, partition)])}`` of the group's live members."""
    from pylog.coordinator.group_membership import GroupMembership, read_group_file
    file_state = read_group_file(root, group)
    if file_state is None:
        return {}
    membership = GroupMembership(root, group)
    try:
        live = membership.live_members(file_state)
    finally:
        membership.close()
    return {m: (file_state["members"][m]["client_id"], file_state["members"][m]["client_host"],
                [tuple(tp) for tp in file_state["assignment"].get(m, [])]) for m in live}


def _log_end_offset(root: str, topic: str, partition: int) -> int | None:
    from pylog.log import Log
    path = os.path.join(root, partition_dir_name(topic, partition))
    if not os.path.isdir(path):
        return None
    with Log.open(path, read_only=True) as log:
        return log.log_end_offset


def _log_start_offset(root: str, topic: str, partition: int) -> int:
    from pylog.log import Log
    with Log.open(os.path.join(root, partition_dir_name(topic, partition)), read_only=True) as log:
        return log.log_start_offset


_DESCRIBE = "{:<15} {:<15} {:<10} {:<15} {:<15} {:<15} {:<50} {:<15} {}"


def describe(root: str, group: str, state) -> None:
    offsets = state.offsets.get(group, {})
    members = _live_members(root, group)
    owner = {tp: (m, c, h) for m, (c, h, tps) in members.items() for tp in tps}
    if not offsets and not members and group not in state.groups:
        print(f"Error: Consumer group '{group}' does not exist.")
        return
    print()
    if not members:
        print(f"Consumer group '{group}' has no active members.")
        print()
    print(_DESCRIBE.format("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                           "HOST", "CLIENT-ID"))
    for tp in sorted(set(offsets) | set(owner)):
        current = offsets[tp].offset if tp in offsets else None
        end = _log_end_offset(root, *tp)
        lag = "-" if current is None or end is None else max(0, end - current)
        m, c, h = owner.get(tp, ("-", "-", "-"))
        print(_DESCRIBE.format(group, tp[0], tp[1], "-" if current is None else current,
                               "-" if end is None else end, lag, m, h, c))


def _partitions(args, root: str, current: dict) -> list:
    from pylog.manager import LogManager
    manager = LogManager(root, read_only=True)
    if args.all_topics:
        return sorted(tp for tp in current)
    out = []
    for spec in args.topic:
        topic, _, parts = spec.partition(":")
        numbers = [int(p) for p in parts.split(",")] if parts else manager.partitions(topic)
        out.extend((topic, p) for p in numbers)
    if not out:
        raise InvalidArgumentError("give --topic T[:P,...] or --all-topics")
    return out


def _target(args, root: str, tp, current: int | None) -> int:
    start, end = _log_start_offset(root, *tp), _log_end_offset(root, *tp)
    if args.to_earliest:
        target = start
    elif args.to_latest:
        target = end
    elif args.to_offset is not None:
        target = args.to_offset
    elif args.shift_by is not None:
        target = (current if current is not None else end) + args.shift_by
    elif args.to_datetime is not None:
        from pylog.log import Log
        ms = _parse_datetime(args.to_datetime)
        with Log.open(os.path.join(root, partition_dir_name(*tp)), read_only=True) as log:
            found = log.offset_for_timestamp(ms)
        target = end if found is None else found
    elif args.to_current:
        target = current if current is not None else end
    else:
        raise InvalidArgumentError("give one of --to-earliest, --to-latest, --to-current, --to-offset, "
                                   "--shift-by, --to-datetime")
    return min(max(target, start), end)  # Kafka clamps to the log's range


def _parse_datetime(text: str) -> int:
    try:
        dt = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise InvalidArgumentError(f"--to-datetime {text!r} is not YYYY-MM-DDTHH:mm:SS.sss") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=datetime.timezone.utc)
    return int(dt.timestamp() * 1000)


def reset_offsets(args, group: str, state) -> None:
    from pylog.coordinator.group_coordinator import GroupCoordinator
    if _live_members(args.root, group):
        raise GroupNotEmptyError(f"Assignments can only be reset if the group '{group}' is inactive, "
                                 f"but the current state is Stable.")
    current = {tp: om.offset for tp, om in state.offsets.get(group, {}).items()}
    plan = {}
    for tp in _partitions(args, args.root, current):
        if _log_end_offset(args.root, *tp) is None:
            raise UnknownTopicError(f"no partition {tp[0]}-{tp[1]} in {args.root}")
        plan[tp] = _target(args, args.root, tp, current.get(tp))
    print()
    print("{:<30} {:<30} {:<10} {:<15}".format("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"))
    for (topic, p), offset in sorted(plan.items()):
        print("{:<30} {:<30} {:<10} {:<15}".format(group, topic, p, offset))
    if args.execute:
        coordinator = GroupCoordinator.for_root(args.root)
        try:
            coordinator.commit_offsets(group, plan)
        finally:
            coordinator.release()
