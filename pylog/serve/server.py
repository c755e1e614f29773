"""``Server``: ``pylog serve`` in-process, as Kafka's ``BrokerServer`` starts and stops the
socket server and request handlers around its log manager.

The event loop runs in a thread of its own; :meth:`Server.start` returns once the socket
accepts connections, :meth:`Server.stop` (or leaving the ``with`` block) stops accepting,
ends the connections, waits for the appends in flight, and gives the partitions back to
the log dir's writer pool, which closes them (the log dir's clean-shutdown marker written
as the logs' close writes it) unless a pylog client of this process still uses it.

>>> import tempfile
>>> with Server(tempfile.mkdtemp(), listen=("127.0.0.1", 0)) as server:
...     server.host, server.port > 0
('127.0.0.1', True)
"""

from __future__ import annotations

import asyncio
import threading

from pylog.errors import InvalidConfigError
from pylog.manager import LogManager
from pylog.serve.kafka_apis import KafkaApis
from pylog.serve.serve_config import ServeConfig
from pylog.serve.socket_server import SocketServer
from pylog.serve.txn_expiry import abort_timed_out_transactions

#: Kafka's listener default: loopback here, as this is a server for development and tests
DEFAULT_LISTEN = ("127.0.0.1", 9092)


class Server:
    """Serves the log dir ``root`` (created if missing) with Kafka's protocol on ``listen``
    (host, port; port 0 picks a free one). ``config`` keys are
    :class:`~pylog.serve.serve_config.ServeConfig`'s (``auto_create_topics_enable``,
    ``num_partitions``, ``max_connections``, ...). Cost of start: opening the log dir
    (partitions open on first use) and one bind."""

    def __init__(self, root, *, listen: tuple[str, int] = DEFAULT_LISTEN, **config):
        self.root = root
        unknown = sorted(set(config) - set(ServeConfig.__dataclass_fields__))
        if unknown:
            raise InvalidConfigError(f"unknown server settings {', '.join(unknown)}: the settings are "
                                     f"{', '.join(ServeConfig.__dataclass_fields__)}")
        self.config = ServeConfig(**config)
        self._listen = listen
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._failure: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self.manager: LogManager | None = None
        self.address: tuple[str, int] | None = None

    @property
    def host(self) -> str:
        return self.address[0]

    @property
    def port(self) -> int:
        return self.address[1]

    @property
    def bootstrap_servers(self) -> str:
        """``host:port``, as Kafka clients' ``bootstrap.servers`` takes it."""
        return f"{self.host}:{self.port}"

    def start(self) -> "Server":
        """Open the log dir, bind, and return once connections are accepted. A failure to
        bind (the port is taken) or to open the log dir is raised here."""
        if self._thread is not None:
            return self
        self.manager = LogManager(self.root)
        self._thread = threading.Thread(target=self._run, name="pylog-serve", daemon=True)
        self._thread.start()
        self._started.wait()
        if self._failure is not None:
            self._thread.join()
            self._thread = None
            self.manager.close()
            raise self._failure
        return self

    def stop(self) -> None:
        """Stop accepting, end the connections, finish the appends in flight and give the
        logs back (closed, flushed, the clean-shutdown marker written, when no pylog client
        of this process holds the log dir's writer pool). Safe to call twice."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        if thread.is_alive():  # else its loop already ended (a failure, logged by the thread)
            self._loop.call_soon_threadsafe(self._stopping.set)
            thread.join()
        self.manager.close()

    def wait(self) -> None:
        """Block until the server stops (another thread called :meth:`stop`)."""
        thread = self._thread
        if thread is not None:
            thread.join()

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as e:  # a failure before start returned is raised there
            if not self._started.is_set():
                self._failure = e
                self._started.set()
            else:
                raise

    async def _main(self) -> None:
        self._loop, self._stopping = asyncio.get_running_loop(), asyncio.Event()
        host, port = self._listen
        apis = None
        try:
            sockets = SocketServer(self.config, host, port)
            self.address = sockets.address
            apis = KafkaApis(self.manager, self.config, advertised_host=self.host, advertised_port=self.port)
            sockets.start(apis)
            expiry = asyncio.create_task(abort_timed_out_transactions(apis))
            self._started.set()
            await self._stopping.wait()
            expiry.cancel()
            await asyncio.gather(expiry, return_exceptions=True)
            await sockets.close()
        finally:
            if apis is not None:
                apis.close()

    def __enter__(self) -> "Server":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"Server({self.root!r}, listen={self.address or self._listen})"
