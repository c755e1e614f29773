"""``pylog consumer-groups ROOT``: Kafka's ``kafka-consumer-groups.sh`` on a log dir:
``--list``; ``--describe --group G`` with ``--offsets`` (the default: per partition the
current offset, log end offset, lag and member), ``--members [--verbose]`` or ``--state``;
``--reset-offsets`` (``--to-earliest``, ``--to-latest``, ``--to-current``, ``--to-offset N``,
``--shift-by N``, ``--to-datetime``, ``--by-duration``, ``--from-file``; ``--dry-run`` or
``--execute``; ``--export`` prints the plan as CSV); ``--delete-offsets`` and ``--delete``;
with Kafka's columns. Groups are read from ``__consumer_offsets`` (pylog's or a broker's)
and, for live members, from the group files pylog's consumers keep."""

from __future__ import annotations

import datetime
import os
import re
import sys

from pylog.coordinator.group_coordinator import GroupCoordinator
from pylog.coordinator.group_membership import GroupMembership, read_group_file
from pylog.coordinator.offsets_reader import OFFSETS_TOPIC, read_group_state
from pylog.coordinator.partitioning import partition_for_group
from pylog.errors import GroupNotEmptyError, InvalidArgumentError, UnknownTopicError
from pylog.log import Log
from pylog.manager import LogManager
from pylog.partition_dir import partition_dir_name
from pylog.record.encode import now_ms

#: Kafka's tool lists offsets read_uncommitted: latest is the high watermark (Log.list_offset)
ISOLATION = "uncommitted"


def add_parser(sub) -> None:
    p = sub.add_parser("consumer-groups")
    p.add_argument("root", help="the log dir")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="list the groups")
    action.add_argument("--describe", action="store_true", help="offsets, lag and members of --group")
    action.add_argument("--reset-offsets", action="store_true", help="reset the offsets of an inactive --group")
    action.add_argument("--delete", action="store_true", help="delete an inactive --group's offsets and metadata")
    action.add_argument("--delete-offsets", action="store_true",
                        help="delete --group's offsets of --topic (not of a topic its live members subscribe to)")
    p.add_argument("--group", action="append", default=[], help="the group (repeat for several)")
    p.add_argument("--all-groups", action="store_true", help="every group of the log dir")
    view = p.add_mutually_exclusive_group()
    view.add_argument("--offsets", action="store_true", help="with --describe: offsets and lag per partition "
                                                             "(the default)")
    view.add_argument("--members", action="store_true", help="with --describe: the live members")
    view.add_argument("--state", action="store_true", help="with --describe: strategy, state and member count")
    p.add_argument("--verbose", action="store_true", help="with --describe --members: each member's partitions")
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("--topic", action="append", default=[],
                       help="TOPIC or TOPIC:0,1 (--reset-offsets, --delete-offsets)")
    scope.add_argument("--all-topics", action="store_true", help="every partition the group has an offset for")
    to = p.add_mutually_exclusive_group()
    to.add_argument("--to-earliest", action="store_true", help="reset to the log start offset")
    to.add_argument("--to-latest", action="store_true", help="reset to the log end offset")
    to.add_argument("--to-current", action="store_true", help="keep the committed offset (the log end without one)")
    to.add_argument("--to-offset", type=int, help="reset to this offset")
    to.add_argument("--shift-by", type=int, help="move the committed offset by N (negative: back)")
    to.add_argument("--to-datetime", help="YYYY-MM-DDTHH:mm:SS.sss (UTC unless an offset is given)")
    to.add_argument("--by-duration", metavar="PnDTnHnMnS",
                    help="the first offset at or after now minus this ISO-8601 duration (PT30M: 30 minutes ago)")
    to.add_argument("--from-file", metavar="CSV", help="the offsets of a CSV file as --export writes it: "
                                                       "topic,partition,offset (group,topic,partition,offset "
                                                       "for several groups)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="print the new offsets only (the default)")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    p.add_argument("--export", action="store_true", help="with --reset-offsets: print the new offsets as CSV "
                                                         "(for --from-file)")
    p.set_defaults(run=run)


#: Kafka's warning for --reset-offsets without --dry-run or --execute (a dry run, for now)
NO_EXECUTE_WARNING = ("WARN: No action will be performed as the --execute option is missing. In version 5.0, this "
                      "command will require either --dry-run or --execute to be specified. You should add the "
                      "--dry-run option explicitly if you are scripting this command and want to keep the current "
                      "default behavior without prompting.")


def _check_options(args) -> None:
    """Options that only go with one action are refused elsewhere, as Kafka's tool does."""
    only = {"describe": ("offsets", "members", "state", "verbose"),
            "reset_offsets": ("export", "execute", "dry_run", "to_earliest", "to_latest", "to_current", "to_offset",
                              "shift_by", "to_datetime", "by_duration", "from_file")}
    for action, options in only.items():
        for option in options:
            if not getattr(args, action) and getattr(args, option) not in (None, False):
                raise InvalidArgumentError(f"--{option.replace('_', '-')} goes only with "
                                           f"--{action.replace('_', '-')}")


def run(args) -> int:
    _check_options(args)
    if args.reset_offsets and not (args.dry_run or args.execute):
        print(NO_EXECUTE_WARNING, file=sys.stderr)
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
        targets = sorted(set(targets))  # Kafka describes the groups from a map sorted by id
        for g in targets:
            if args.members:
                describe_members(args.root, g, state, verbose=args.verbose)
            elif args.state:
                describe_state(args.root, g, state)
            else:
                describe(args.root, g, state)
        return 0 if all(_known(args.root, g, state) for g in targets) else 1  # Kafka's error line said which
    if args.delete_offsets:
        return delete_offsets(args, targets, state)
    if args.delete:
        return delete_groups(args.root, targets, state)
    from_file = _read_offsets_file(args.from_file, targets) if args.from_file else None
    plans = {g: reset_offsets(args, g, state, None if from_file is None else from_file.get(g, {})) for g in targets}
    if args.export:
        print(export_csv(plans), end="")
    return 0


def delete_groups(root: str, targets: list[str], state) -> int:
    """Kafka's ``--delete``: tombstones for each inactive group; 1 if one does not exist."""
    missing = [g for g in targets if not _known(root, g, state)]
    coordinator = GroupCoordinator.for_root(root)
    try:
        for g in targets:
            if g not in missing:
                coordinator.delete_group(g)
                print(f"Deletion of requested consumer groups ('{g}') was successful.")
    finally:
        coordinator.release()
    for g in missing:
        print(f"Error: Deletion of some consumer groups failed:\n* Group '{g}' could not be deleted due to: "
              f"the group id does not exist.")
    return 1 if missing else 0


def _group_file(root: str, group: str) -> tuple[dict | None, list[str]]:
    """The group's file state (None for a group no pylog consumer joined) and its live members."""
    file_state = read_group_file(root, group)
    if file_state is None:
        return None, []
    membership = GroupMembership(root, group)
    try:
        return file_state, membership.live_members(file_state)
    finally:
        membership.close()


def _live_members(root: str, group: str) -> dict:
    """``{member_id: (client_id, host, [(topic, partition)])}`` of the group's live members."""
    file_state, live = _group_file(root, group)
    return {m: (file_state["members"][m]["client_id"], file_state["members"][m]["client_host"],
                [tuple(tp) for tp in file_state["assignment"].get(m, [])]) for m in live}


def _log_end_offset(root: str, topic: str, partition: int) -> int | None:
    path = os.path.join(root, partition_dir_name(topic, partition))
    if not os.path.isdir(path):
        return None
    with Log.open(path, read_only=True) as log:
        return log.list_offset("latest", isolation=ISOLATION)


def describe(root: str, group: str, state) -> None:
    """Kafka's ``--describe [--offsets]``: a row per partition with an offset or an owner;
    columns as wide as their longest value (15 at least), as Kafka sizes them."""
    offsets = state.offsets.get(group, {})
    members = _live_members(root, group)
    owner = {tp: (m, c, h) for m, (c, h, tps) in members.items() for tp in tps}
    if not _exists(root, group, state, members):
        return
    if not members:
        _no_active_members(group)
    rows = []
    for tp in sorted(set(offsets) | set(owner)):
        current = offsets[tp].offset if tp in offsets else None
        end = _log_end_offset(root, *tp)
        lag = "-" if current is None or end is None else max(0, end - current)
        m, c, h = owner.get(tp, ("-", "-", "-"))
        rows.append((group, tp[0], tp[1], "-" if current is None else current, "-" if end is None else end, lag,
                     m, h, c))
    widths = {0: 15, 1: 15, 6: 15, 7: 15}  # GROUP, TOPIC, CONSUMER-ID, HOST grow with their values
    for row in rows:
        for i in widths:
            widths[i] = max(widths[i], len(str(row[i])))
    line = (f"{{:<{widths[0]}}} {{:<{widths[1]}}} {{:<10}} {{:<15}} {{:<15}} {{:<15}} {{:<{widths[6]}}} "
            f"{{:<{widths[7]}}} {{}}")
    print()
    print(line.format("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                      "CLIENT-ID"))
    for row in rows:
        print(line.format(*row))


def _no_active_members(group: str) -> None:
    """Kafka's note for an empty group, on stderr (stdout keeps the table)."""
    print(f"\nConsumer group '{group}' has no active members.", file=sys.stderr)


def _known(root: str, group: str, state, members: dict | None = None) -> bool:
    """``__consumer_offsets`` holds the group's offsets or metadata, or pylog consumers are
    its live members (``members``, when already looked up)."""
    if group in state.offsets or group in state.groups:
        return True
    return bool(_live_members(root, group) if members is None else members)


def _exists(root: str, group: str, state, members: dict | None = None) -> bool:
    """:func:`_known`, else Kafka's line saying the group does not exist."""
    if _known(root, group, state, members):
        return True
    print(f"Error: Consumer group '{group}' does not exist.")
    return False


def describe_members(root: str, group: str, state, *, verbose: bool = False) -> None:
    """Kafka's ``--describe --members [--verbose]``: one line per live member, columns
    as wide as their longest value (15 at least)."""
    if not _exists(root, group, state):
        return
    members = _live_members(root, group)
    if not members:
        _no_active_members(group)
        return
    rows = [(group, member, host, client, len(tps), _assignment(tps) if verbose else "")
            for member, (client, host, tps) in sorted(members.items())]
    widths = [max(15, *(len(str(row[i])) for row in rows)) for i in range(4)]
    line = " ".join(f"{{:<{w}}}" for w in widths) + " {:<15} {}"
    print()
    print(line.format("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT" if verbose else "")
          .rstrip())
    for row in rows:
        print(line.format(*row).rstrip())


def _assignment(tps) -> str:
    """``orders(0,1,2), audit(0)``, as Kafka prints an assignment; ``-`` for none."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(tps):
        by_topic.setdefault(topic, []).append(partition)
    return ", ".join(f"{t}({','.join(map(str, ps))})" for t, ps in by_topic.items()) or "-"


_STATE = "{:<25} {:<25} {:<20} {:<15} {}"


def describe_state(root: str, group: str, state) -> None:
    """Kafka's ``--describe --state``. The coordinator is the ``__consumer_offsets``
    partition holding the group (on a broker, its leader is the group's coordinator)."""
    if not _exists(root, group, state):
        return
    file_state, live = _group_file(root, group)
    current, strategy = (file_state["state"], file_state["protocol"] or "-") if live else ("Empty", "-")
    print()
    print(_STATE.format("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"))
    print(_STATE.format(group, f"{partition_dir_name(OFFSETS_TOPIC, partition_for_group(group))} (0)", strategy,
                        current, len(live)))


def delete_offsets(args, groups: list[str], state) -> int:
    """Kafka's ``--delete-offsets``: one status line per partition; 1 if any failed (every
    one when the group does not exist, and then nothing is written)."""
    if len(groups) != 1:
        raise InvalidArgumentError("--delete-offsets takes one --group")
    if not args.topic:
        raise InvalidArgumentError("--delete-offsets needs --topic TOPIC[:P,...]")
    group = groups[0]
    with LogManager(args.root, read_only=True) as manager:
        partitions = _topic_partitions(args.topic, manager)
    if not _known(args.root, group, state):
        print(f"\nError: '{group}' does not exist.")
        results = dict.fromkeys(partitions, "The group id does not exist.")
    else:
        coordinator = GroupCoordinator.for_root(args.root)
        try:
            results = coordinator.delete_offsets(group, partitions)
        finally:
            coordinator.release()
        topics = ", ".join(dict.fromkeys(t for t, _ in partitions))
        print(f"Request succeed for deleting offsets with topic {topics} group {group}")
    print()
    print("{:<30} {:<15} {:<30}".format("TOPIC", "PARTITION", "STATUS"))
    for (topic, partition), error in sorted(results.items()):
        print("{:<30} {:<15} {:<30}".format(topic, partition, "Successful" if error is None else f"Error: {error}"))
    return 1 if any(results.values()) else 0


def _topic_partitions(specs: list[str], manager) -> list[tuple[str, int]]:
    """``TOPIC`` (all its partitions) or ``TOPIC:0,1`` per spec; an unknown topic or a
    partition it does not have is an error."""
    out = []
    for spec in specs:
        topic, _, parts = spec.partition(":")
        known = manager.partitions(topic)
        try:
            numbers = [int(p) for p in parts.split(",")] if parts else known
        except ValueError:
            raise InvalidArgumentError(f"--topic {spec!r} is not TOPIC or TOPIC:0,1") from None
        unknown = sorted(set(numbers) - set(known))
        if unknown:
            raise UnknownTopicError(f"topic {topic!r} has no partition {unknown[0]} in {manager.root}")
        out.extend((topic, p) for p in numbers)
    return out


def _partitions(args, root: str, current: dict) -> list:
    if args.all_topics:
        return sorted(tp for tp in current)
    if not args.topic:
        raise InvalidArgumentError("give --topic T[:P,...] or --all-topics")
    return _topic_partitions(args.topic, LogManager(root, read_only=True))


def _target(args, log, current: int | None, file_offset: int | None) -> int:
    """The new offset of the partition whose (read-only) ``log`` is given: the committed
    offset is ``current``, the one ``--from-file`` gives ``file_offset``."""
    start, end = (log.list_offset(spec, isolation=ISOLATION) for spec in ("earliest", "latest"))
    if file_offset is not None:
        target = file_offset
    elif args.to_earliest:
        target = start
    elif args.to_latest:
        target = end
    elif args.to_offset is not None:
        target = args.to_offset
    elif args.shift_by is not None:
        target = (current if current is not None else end) + args.shift_by
    elif args.to_datetime is not None or args.by_duration is not None:
        ms = (_parse_datetime(args.to_datetime) if args.to_datetime is not None
              else now_ms() - _parse_duration_ms(args.by_duration))
        found = log.list_offset(ms, isolation=ISOLATION)
        target = end if found is None else found
    elif args.to_current:
        target = current if current is not None else end
    else:
        raise InvalidArgumentError("give one of --to-earliest, --to-latest, --to-current, --to-offset, "
                                   "--shift-by, --to-datetime, --by-duration, --from-file")
    return min(max(target, start), end)  # Kafka clamps to the log's range


_DURATION = re.compile(r"([-+]?)P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+(?:[.,]\d{1,9})?)S)?)?",
                       re.IGNORECASE)


def _parse_duration_ms(text: str) -> int:
    """An ISO-8601 duration as Java's ``Duration.parse`` reads it (``PT30M``, ``P1DT2H``,
    ``PT0.5S``), in milliseconds."""
    match = _DURATION.fullmatch(text)
    if match is None or not any(match.groups()[1:]) or text.upper().endswith("T"):
        raise InvalidArgumentError(f"--by-duration {text!r} is not an ISO-8601 duration PnDTnHnMnS (PT30M)")
    sign, days, hours, minutes, seconds = match.groups()
    ms = sum(int(v or 0) * unit for v, unit in ((days, 86_400_000), (hours, 3_600_000), (minutes, 60_000)))
    ms += round(float((seconds or "0").replace(",", ".")) * 1000)
    return -ms if sign == "-" else ms


def _parse_datetime(text: str) -> int:
    try:
        dt = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise InvalidArgumentError(f"--to-datetime {text!r} is not YYYY-MM-DDTHH:mm:SS.sss") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=datetime.timezone.utc)
    return int(dt.timestamp() * 1000)


def reset_offsets(args, group: str, state, from_file: dict | None = None) -> dict:
    """Plan (and with ``--execute`` commit) the group's new offsets; prints them as a
    table unless ``--export``. ``from_file``: the group's offsets read by ``--from-file``.
    Returns the plan."""
    if _live_members(args.root, group):
        raise GroupNotEmptyError(f"Assignments can only be reset if the group '{group}' is inactive, "
                                 f"but the current state is Stable.")
    current = {tp: om.offset for tp, om in state.offsets.get(group, {}).items()}
    plan = {}
    for tp in sorted(from_file) if from_file is not None else _partitions(args, args.root, current):
        path = os.path.join(args.root, partition_dir_name(*tp))
        if not os.path.isdir(path):
            raise UnknownTopicError(f"no partition {tp[0]}-{tp[1]} in {args.root}")
        with Log.open(path, read_only=True) as log:
            plan[tp] = _target(args, log, current.get(tp), None if from_file is None else from_file[tp])
    if not args.export:
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
    return plan


def export_csv(plans: dict) -> str:
    """Kafka's ``--export``: ``topic,partition,offset`` lines for one group,
    ``group,topic,partition,offset`` for several."""
    lines = [([] if len(plans) == 1 else [group]) + [topic, str(p), str(offset)]
             for group, plan in plans.items() for (topic, p), offset in sorted(plan.items())]
    return "".join(",".join(line) + "\n" for line in lines)


def _read_offsets_file(path: str, groups: list[str]) -> dict:
    """``{group: {(topic, partition): offset}}`` from a CSV file as :func:`export_csv`
    writes it (lines of three fields need a single ``--group``)."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise InvalidArgumentError(f"cannot read --from-file {path}: {e.strerror}") from None
    out: dict = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) == 3 and len(groups) == 1:
            fields = [groups[0], *fields]
        try:
            group, topic, partition, offset = fields
            out.setdefault(group, {})[(topic, int(partition))] = int(offset)
        except ValueError:
            raise InvalidArgumentError(f"{path}:{number}: expected topic,partition,offset (or group,topic,"
                                       f"partition,offset with several groups), got {line!r}") from None
    missing = [g for g in groups if g not in out]
    if missing:
        raise InvalidArgumentError(f"{path} has no offsets for group {missing[0]!r}")
    return out
