"""``pylog serve ROOT [--listen HOST:PORT]``: serve a log dir with Kafka's protocol, so
Kafka's clients produce to and fetch from its topics (docs/serve.md). Prints ``listening
on HOST:PORT`` once connections are accepted; Ctrl-C or SIGTERM stops it cleanly (the logs
closed, the clean-shutdown marker written) with exit code 0."""

from __future__ import annotations

import importlib.util
import logging
import signal
import sys
import threading

from pylog.errors import InvalidArgumentError

#: the signals that stop the server
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def add_parser(sub) -> None:
    p = sub.add_parser("serve")
    p.add_argument("root", metavar="ROOT", help="the log dir to serve (created if missing)")
    p.add_argument("--listen", default="127.0.0.1:9092", metavar="HOST:PORT",
                   help="address to accept connections on (default 127.0.0.1:9092; port 0 picks a free one)")
    p.add_argument("--auto-create-topics", default=True, action="store_true",
                   help="create a topic a client's Metadata request names (Kafka's auto.create.topics.enable; "
                        "the default)")
    p.add_argument("--no-auto-create-topics", dest="auto_create_topics", action="store_false",
                   help="answer UNKNOWN_TOPIC_OR_PARTITION for a topic that does not exist")
    p.add_argument("--num-partitions", type=int, default=1, metavar="N",
                   help="partitions of an automatically created topic (Kafka's num.partitions; default 1)")
    p.add_argument("--max-connections", type=int, default=1000, metavar="N",
                   help="connections past N are closed as they arrive (default 1000)")
    p.set_defaults(run=run)


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` as (host, port); :class:`InvalidArgumentError` naming it otherwise.

    >>> parse_listen("127.0.0.1:9092"), parse_listen("[::1]:0")
    (('127.0.0.1', 9092), ('::1', 0))
    """
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise InvalidArgumentError(f"--listen {text!r} is not HOST:PORT (such as 127.0.0.1:9092)")
    return host.strip("[]"), int(port)


def defer_package_init(name: str) -> None:
    """Register the package ``name`` with its ``__init__`` run by the first use of a name it
    defines rather than now, so that importing its submodules does not run it: kafka-python's
    loads its whole client (admin, consumer, producer, network; ~0.2 s, most of this command's
    start) though the server uses only ``kafka.protocol`` and ``kafka.errors``. Nothing is done
    when the package is imported already or is missing (its import error comes later)."""
    if name in sys.modules:
        return
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return
    if spec is None or spec.submodule_search_locations is None:
        return
    package = importlib.util.module_from_spec(spec)
    first_use, ran = threading.RLock(), []  # reentrant: the __init__'s own lookups come back here

    def __getattr__(attribute: str):
        with first_use:  # a thread arriving while another runs the __init__ waits for it
            if not ran:
                ran.append(True)
                try:
                    spec.loader.exec_module(package)
                finally:
                    vars(package).pop("__getattr__", None)
        try:
            return vars(package)[attribute]
        except KeyError:
            raise AttributeError(f"module {name!r} has no attribute {attribute!r}") from None

    package.__getattr__ = __getattr__
    sys.modules[name] = package


def run(args) -> int:
    defer_package_init("kafka")
    from pylog.serve import Server  # kafka-python, of the extra 'serve': a one-line error without it

    logging.basicConfig(level=logging.WARNING, format="pylog serve: %(message)s")
    listen = parse_listen(args.listen)
    # blocked before the server's threads start (they inherit the mask): only sigwait sees them
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    server = Server(args.root, listen=listen, auto_create_topics_enable=args.auto_create_topics,
                    num_partitions=args.num_partitions, max_connections=args.max_connections).start()
    try:
        print(f"listening on {server.bootstrap_servers}", flush=True)
        signal.sigwait(STOP_SIGNALS)
    finally:
        server.stop()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    return 0
