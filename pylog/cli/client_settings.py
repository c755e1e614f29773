"""Kafka client settings given to the console tools as Kafka's tools take them:
``--command-property NAME=VALUE`` (Kafka's older name: ``--producer-property`` /
``--consumer-property``) and a Java properties file, ``--command-config FILE`` (older:
``--producer.config`` / ``--consumer.config``). A setting that has a meaning here sets the
option that has it (``linger.ms=20`` is ``--linger-ms 20``); any other is refused in one line
naming it and where it came from, and saying why: pylog's tools are no network clients, so
``bootstrap.servers``, security and tuning settings have nothing to act on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from pylog.errors import InvalidArgumentError

#: settings (or prefixes) that name or reach a cluster: pylog takes a log dir in their place
CLUSTER_SETTINGS = ("bootstrap.servers", "security.protocol", "sasl.", "ssl.")


@dataclass(frozen=True)
class Setting:
    """What a Kafka client setting is here: the option it stands for (its ``dest`` on the
    parsed arguments) and how its text becomes that option's value (ValueError if wrong)."""
    option: str
    dest: str
    parse: Callable[[str], object]


def choice(values: dict[str, object]) -> Callable[[str], object]:
    """A parser taking one of ``values``' keys to its value."""
    def parse(text: str):
        if text not in values:
            raise ValueError(f"not one of {', '.join(values)}")
        return values[text]
    return parse


def integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError("not a whole number") from None


def add_arguments(p, role: str, known: dict[str, Setting]) -> None:
    """``--command-property`` and ``--command-config`` (and the ``role``'s older names) on
    the parser ``p``, after the options ``known`` sets, whose defaults it records."""
    takes = ", ".join(f"{name} (as {s.option})" for name, s in known.items())
    p.add_argument("--command-property", f"--{role}-property", dest="client_properties", action="append",
                   default=[], metavar="NAME=VALUE",
                   help=f"a Kafka {role} setting, repeatable; those with a use here: {takes}")
    p.add_argument("--command-config", f"--{role}.config", dest="client_config", metavar="FILE",
                   help="a Java properties file of such settings")
    p.set_defaults(client_settings=known, client_defaults={s.dest: p.get_default(s.dest) for s in known.values()})


def apply(args) -> None:
    """Set the options the settings stand for: an option left at its default takes the
    setting; an option given another value than the setting is refused (they disagree).
    Raises :class:`InvalidArgumentError` naming the setting and where it came from."""
    for name, value, where in _settings(args):
        setting = _known(args, name, where)
        try:
            parsed = setting.parse(value)
        except ValueError as e:
            raise InvalidArgumentError(f"{where}: {name}={value!r}: {e}") from None
        current = getattr(args, setting.dest)
        if current != args.client_defaults[setting.dest] and current != parsed:
            raise InvalidArgumentError(f"{where}: {name}={value} disagrees with {setting.option} {current}")
        setattr(args, setting.dest, parsed)


def _known(args, name: str, where: str) -> Setting:
    if name in args.client_settings:
        return args.client_settings[name]
    if name.startswith(CLUSTER_SETTINGS):
        raise InvalidArgumentError(f"{where}: {name} is a setting for reaching a cluster: pylog reads and writes "
                                   f"the log dir {args.root} instead")
    raise InvalidArgumentError(f"{where}: {name} has no use here (no network client, no broker); the settings "
                               f"with one: {', '.join(args.client_settings)}")


def _settings(args) -> list[tuple[str, str, str]]:
    """``(name, value, where)`` of the config file's settings, then the properties'."""
    out = _read_file(args.client_config) if args.client_config else []
    for item in args.client_properties:
        name, sep, value = item.partition("=")
        if not sep:
            raise InvalidArgumentError(f"--command-property {item!r} is not NAME=VALUE")
        out.append((name.strip(), value.strip(), "--command-property"))
    return out


def _read_file(path: str) -> list[tuple[str, str, str]]:
    """The settings of a Java properties file: ``name=value`` (or ``name: value``) lines,
    ``#`` and ``!`` starting comments."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise InvalidArgumentError(f"cannot read --command-config {path}: {e.strerror}") from None
    out = []
    for number, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut < 0:
            raise InvalidArgumentError(f"{path}:{number}: {line!r} is not NAME=VALUE")
        out.append((line[:cut].strip(), line[cut + 1:].strip(), f"{path}:{number}"))
    return out
