"""``pylog topics ROOT``: Kafka's ``kafka-topics.sh`` on a log dir: ``--create``, ``--list``,
``--describe``, ``--alter --partitions N`` (a topic only grows) and ``--delete``, with Kafka's
output. ``--topic`` is a regular expression for all but ``--create``, as with Kafka.

``--describe`` prints Kafka's lines; pylog is one node, so every partition's leader, replica
and in-sync replica is that node (``node.id`` of the log dir's ``meta.properties``, 0 without
one), and the replication factor is 1::

    Topic: orders	TopicId: 7bz...	PartitionCount: 2	ReplicationFactor: 1	Configs: cleanup.policy=compact
    	Topic: orders	Partition: 0	Leader: 0	Replicas: 0	Isr: 0	Elr: N/A	LastKnownElr: N/A

``TopicId`` is the id in the partitions' ``partition.metadata`` (Kafka writes one; so does
``--create``), left out when there is none, as Kafka leaves out a zero id.
"""

from __future__ import annotations

import os

from pylog.cli.common import add_exclude_internal_argument, internal_topic, wanted_topics
from pylog.config import LogConfig
from pylog.errors import InvalidArgumentError, InvalidConfigError, UnknownTopicError
from pylog.manager import LogManager
from pylog.partition_dir import new_topic_id, topic_id_of, write_topic_id

ACTIONS = ("create", "list", "describe", "alter", "delete")


def add_parser(sub) -> None:
    p = sub.add_parser("topics")
    p.add_argument("root", help="the log dir holding <topic>-<partition> directories")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--create", dest="action", action="store_const", const="create",
                        help="create --topic with --partitions and --config settings")
    action.add_argument("--list", dest="action", action="store_const", const="list", help="print the topic names")
    action.add_argument("--describe", dest="action", action="store_const", const="describe",
                        help="print each topic's id, partition count, settings and partitions")
    action.add_argument("--alter", dest="action", action="store_const", const="alter",
                        help="grow --topic to --partitions partitions (a topic only grows)")
    action.add_argument("--delete", dest="action", action="store_const", const="delete",
                        help="delete --topic: its directories, checkpoint lines and settings")
    p.add_argument("--topic", help="the topic; a regular expression (whole name) except with --create")
    p.add_argument("--partitions", type=int, help="partition count: of a new topic (default 1), or to grow to")
    p.add_argument("--replication-factor", type=int, default=1,
                   help="accepted for Kafka's command lines: pylog is one node, so only 1")
    p.add_argument("--config", action="append", metavar="NAME=VALUE",
                   help="a topic setting by Kafka's name (segment.bytes=1048576), repeatable; with --create")
    p.add_argument("--if-not-exists", action="store_true", help="with --create: no error if the topic exists")
    p.add_argument("--if-exists", action="store_true", help="with --alter, --describe, --delete: no error if "
                                                             "no topic matches")
    add_exclude_internal_argument(p)
    kinds = p.add_mutually_exclusive_group()
    kinds.add_argument("--topics-with-overrides", dest="describe_only", action="store_const", const="overrides",
                       help="with --describe: only the topics with settings of their own, their lines alone")
    for flag, what in (("--under-replicated-partitions", "whose ISR is smaller than their replicas (none: "
                                                         "one replica each)"),
                       ("--unavailable-partitions", "without a live leader (none: the log dir leads them)"),
                       ("--under-min-isr-partitions", "whose ISR is under min.insync.replicas (none)"),
                       ("--at-min-isr-partitions", "whose ISR is exactly min.insync.replicas (all: one in-sync "
                                                   "replica, Kafka's default minimum 1)")):
        kinds.add_argument(flag, dest="describe_only", action="store_const", const=flag.strip("-"),
                           help=f"with --describe: only the partition lines of the partitions {what}")
    p.set_defaults(run=run)


def run(args) -> int:
    if args.replication_factor != 1:
        raise InvalidArgumentError(f"--replication-factor {args.replication_factor}: pylog is one node, only 1")
    if args.action == "create":
        return _create(args)
    with LogManager.open_existing(args.root, read_only=args.action in ("list", "describe")) as manager:
        names = _matching(manager, args)
        if args.action == "list":
            for name in names:
                print(name)
        elif args.action == "describe":
            for name in names:
                text = describe(manager, name, only=args.describe_only)
                if text:
                    print(text)
        elif args.action == "alter":
            _alter(manager, names, args)
        else:
            _delete(manager, names, args.topic)
    return 0


def _delete(manager, names: list[str], topic: str) -> None:
    """Delete the topics ``names`` (those ``topic`` matched), none of them when one is
    internal: __consumer_offsets holds every group's offsets, __transaction_state every
    transactional id (kafka-topics.sh refuses them too)."""
    internal = [n for n in names if internal_topic(n)]
    if internal:
        hint = "" if internal == [topic] else (f" (--topic {topic!r} matches it; --exclude-internal-topics leaves "
                                               f"it out)")
        raise InvalidArgumentError(f"Topic {internal[0]} is a kafka internal topic and is not allowed to be marked "
                                   f"for deletion{hint}; nothing was deleted")
    for name in names:
        manager.delete_topic(name)


def _matching(manager, args) -> list[str]:
    if args.topic is None and args.action in ("alter", "delete"):
        raise InvalidArgumentError(f"--{args.action} needs --topic")
    names = wanted_topics(manager.topics(), args.topic, exclude_internal=args.exclude_internal_topics)
    if args.topic is not None and not names and not args.if_exists and args.action != "list":
        raise UnknownTopicError(f"topic {args.topic!r} does not exist in {args.root}")
    return names


def _create(args) -> int:
    if args.topic is None:
        raise InvalidArgumentError("--create needs --topic")
    partitions = 1 if args.partitions is None else args.partitions
    config = LogConfig.from_kafka(_settings(args.config)) if args.config else None
    with LogManager(args.root) as manager:
        if args.topic in manager.topics():
            if args.if_not_exists:
                return 0
            raise InvalidArgumentError(f"topic {args.topic!r} already exists in {args.root}")
        manager.create_topic(args.topic, partitions, config)
        write_topic_id(manager, args.topic, new_topic_id())
    print(f"Created topic {args.topic}.")
    return 0


def _settings(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise InvalidConfigError(f"--config {item!r} is not NAME=VALUE")
        out[name] = value
    return out


def _alter(manager, names: list[str], args) -> None:
    if args.partitions is None:
        raise InvalidArgumentError("--alter needs --partitions (pylog keeps settings in topic-configs.json)")
    for name in names:
        topic_id = topic_id_of(manager, name)
        manager.add_partitions(name, args.partitions)
        if topic_id is not None:
            write_topic_id(manager, name, topic_id)


def describe(manager, name: str, *, only: str | None = None) -> str:
    """Kafka's ``--describe`` lines of one topic: its line and a line per partition, or
    what one of Kafka's filters keeps (``only``: ``overrides``, the topic line of a topic
    with settings of its own; a partition filter, the partition lines it keeps; with one
    replica a partition, led by this log dir, in sync, only ``at-min-isr-partitions``
    keeps any: all, at Kafka's default ``min.insync.replicas`` of 1)."""
    partitions = manager.partitions(name)
    defaults = LogConfig().to_kafka()
    configs = ",".join(f"{k}={v}" for k, v in sorted(manager.topic_config(name).to_kafka().items())
                       if defaults[k] != v)
    topic_id = topic_id_of(manager, name)
    head = f"Topic: {name}" + (f"\tTopicId: {topic_id}" if topic_id else "")
    node = node_id(manager.root)
    lines = [f"{head}\tPartitionCount: {len(partitions)}\tReplicationFactor: 1\tConfigs: {configs}"]
    if only == "overrides":
        return lines[0] if configs else ""
    if only is not None:
        lines = []
        partitions = partitions if only == "at-min-isr-partitions" else []
    lines += [f"\tTopic: {name}\tPartition: {p}\tLeader: {node}\tReplicas: {node}\tIsr: {node}\tElr: N/A"
              f"\tLastKnownElr: N/A" for p in partitions]
    return "\n".join(lines)


def node_id(root: str) -> int:
    """``node.id`` (or ``broker.id``) of the log dir's ``meta.properties``, 0 without one."""
    try:
        with open(os.path.join(root, "meta.properties"), encoding="utf-8") as f:
            props = dict(line.strip().split("=", 1) for line in f if "=" in line and not line.startswith("#"))
    except OSError:
        return 0
    for key in ("node.id", "broker.id"):
        if props.get(key, "").lstrip("-").isdigit():
            return int(props[key])
    return 0
