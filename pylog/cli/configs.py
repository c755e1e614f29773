"""``pylog configs ROOT``: a topic's settings, as ``kafka-configs.sh`` describes and alters
them: ``--entity-type topics --entity-name T`` (or ``--topic T``) with ``--describe
[--all]`` or ``--alter --add-config K=V,K=[V1,V2] --delete-config K,K``.

Settings live in the log dir's ``topic-configs.json`` (Kafka keeps them in its cluster
metadata). An alteration is checked whole before the file is written, and is made under the
lock the client processes take for that file. Client processes holding the topic's logs
(producers, consumers committing) take the new settings at once, as Kafka's brokers do
(pylog/logdir/writers.py); a program that opened a log itself keeps its settings until it
opens it again or calls ``Log.update_config``.
"""

from __future__ import annotations

from pylog.config import KAFKA_FIELDS, LogConfig, kafka_name
from pylog.errors import InvalidArgumentError, InvalidConfigError, UnknownTopicError
from pylog.logdir.metadata import LogDirMetadata
from pylog.logdir.writers import ring
from pylog.manager import LogManager


def add_parser(sub) -> None:
    p = sub.add_parser("configs")
    p.add_argument("root", help="the log dir")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", dest="action", action="store_const", const="describe",
                        help="the topic's own settings (every topic's without a name)")
    action.add_argument("--alter", dest="action", action="store_const", const="alter",
                        help="change the topic's settings with --add-config and --delete-config")
    p.add_argument("--entity-type", choices=["topics"], help="topics: pylog keeps settings per topic only")
    p.add_argument("--entity-name", help="the topic")
    p.add_argument("--topic", help="the same as --entity-type topics --entity-name TOPIC")
    p.add_argument("--add-config", metavar="K=V,...",
                   help="settings by Kafka's names, comma-separated; a list value in brackets: "
                        "cleanup.policy=[compact,delete]")
    p.add_argument("--delete-config", metavar="K,...",
                   help="settings to take back to their defaults, comma-separated")
    p.add_argument("--all", action="store_true", help="with --describe: every setting, not only the topic's own")
    p.set_defaults(run=run)


def run(args) -> int:
    if args.topic is not None and args.entity_name is not None and args.topic != args.entity_name:
        raise InvalidArgumentError(f"--topic {args.topic!r} and --entity-name {args.entity_name!r} differ")
    name = args.topic if args.topic is not None else args.entity_name
    if args.action == "describe":
        if args.add_config or args.delete_config:
            raise InvalidArgumentError("--add-config and --delete-config go with --alter")
        with LogManager.open_existing(args.root, read_only=True) as manager:
            for topic in [name] if name is not None else manager.topics():
                print("\n".join(describe_lines(manager, topic, every=args.all)))
        return 0
    if name is None:
        raise InvalidArgumentError("--alter needs --topic (or --entity-type topics --entity-name)")
    if not (args.add_config or args.delete_config):
        raise InvalidArgumentError("--alter needs --add-config or --delete-config")
    alter(args.root, name, parse_configs(args.add_config or ""), _names(args.delete_config or ""))
    print(f"Completed updating config for topic {name}.")
    return 0


def describe_lines(manager, topic: str, *, every: bool = False) -> list[str]:
    """Kafka's lines: the topic's own settings (``DYNAMIC_TOPIC_CONFIG``), or with ``every``
    all of them (the others ``DEFAULT_CONFIG``, named as topic settings)."""
    _check_topic(manager, topic)
    own = {kafka_name(field) for field in manager.topic_overrides(topic)}
    values = manager.topic_config(topic).to_kafka()
    defaults = LogConfig().to_kafka()
    lines = [f"{'All' if every else 'Dynamic'} configs for topic {topic} are:"]
    for key in sorted(values if every else own):
        synonyms = ([f"DYNAMIC_TOPIC_CONFIG:{key}={values[key]}"] if key in own else []) + \
                   ([f"DEFAULT_CONFIG:{key}={defaults[key]}"] if every else [])
        lines.append(f"  {key}={values[key]} sensitive=false synonyms={{{', '.join(synonyms)}}}")
    return lines


def alter(root: str, topic: str, add: dict[str, str], delete: list[str]) -> None:
    """Set ``add`` (Kafka names and values) and take ``delete`` back to their defaults in
    ``topic``'s settings; everything is checked before the file is written, under the
    clients' lock of topic-configs.json. :class:`UnknownTopicError`,
    :class:`InvalidConfigError`."""
    both = sorted(set(add) & set(delete))
    if both:
        raise InvalidArgumentError(f"{', '.join(both)} both added and deleted")
    added = LogConfig.kafka_overrides(add)
    unknown = sorted(set(delete) - set(KAFKA_FIELDS))
    if unknown:
        raise InvalidConfigError(f"unknown topic setting(s) {', '.join(unknown)}")
    deleted = {KAFKA_FIELDS[k].name for k in delete}
    metadata = LogDirMetadata.for_root(root)
    _check_topic(metadata, topic)
    metadata.alter_topic_config(topic, added, remove=deleted)  # under the lock of topic-configs.json
    ring(root)  # client processes holding the topic's logs take the new settings now


def parse_configs(text: str) -> dict[str, str]:
    """``"a=1,b=[x,y]"`` -> ``{"a": "1", "b": "x,y"}`` (kafka-configs.sh's syntax);
    :class:`InvalidArgumentError` for an entry that is not ``K=V``."""
    out, depth, start = {}, 0, 0
    for i, c in enumerate(text + ","):
        depth += {"[": 1, "]": -1}.get(c, 0)
        if c == "," and depth == 0:
            entry = text[start:i].strip()
            start = i + 1
            if not entry:
                continue
            key, sep, value = entry.partition("=")
            if not sep or not key:
                raise InvalidArgumentError(f"--add-config entry {entry!r} is not K=V")
            out[key.strip()] = value.strip().removeprefix("[").removesuffix("]")
    return out


def _names(text: str) -> list[str]:
    return [n.strip() for n in text.split(",") if n.strip()]


def _check_topic(metadata, topic: str) -> None:
    """``metadata``: a LogManager's, or a remote log dir's."""
    if topic not in metadata.topics():
        raise UnknownTopicError(f"topic {topic!r} does not exist in {metadata.root}")
