"""``SocketServer``: the listening socket and one task per connection on one asyncio
event loop, as Kafka's ``SocketServer`` has its acceptor and processors.

A connection is read one request at a time (a client's requests are answered in the
order sent, as Kafka's processor mutes a channel while its request is handled): a 4-byte
size, checked against ``socket_request_max_bytes`` *before* a buffer for the frame is
allocated, then the frame. A size out of range, a frame that does not parse, an api key or
version not served, or a client that vanishes mid-request closes that connection only;
no file changes, and the server goes on. Connections past ``max_connections`` are closed
as they are accepted. Memory per connection: at most one request frame and one response
without its records (which go out with ``sendfile`` from the segment files).
"""

from __future__ import annotations

import asyncio
import logging
import socket

from pylog.serve.request_channel import BadRequest

LOG = logging.getLogger("pylog.serve")
#: the size prefix of every request and response frame
_SIZE_BYTES = 4
#: pending connections the kernel queues before accept
_BACKLOG = 128


class SocketServer:
    """Binds ``host``:``port`` (0: a free port, see :attr:`address`); once started, serves
    each connection with ``apis`` (:class:`~pylog.serve.kafka_apis.KafkaApis`)."""

    def __init__(self, config, host: str, port: int):
        self._apis, self._config = None, config
        self._listener = socket.create_server((host, port), backlog=_BACKLOG)
        self._listener.setblocking(False)
        self._connections: set[asyncio.Task] = set()
        self._accepting = None

    @property
    def address(self) -> tuple[str, int]:
        """The (host, port) the server listens on."""
        return self._listener.getsockname()[:2]

    def start(self, apis) -> None:
        """Accept connections from now on, answered by ``apis`` (call on the event loop)."""
        self._apis = apis
        self._accepting = asyncio.get_running_loop().create_task(self._accept())

    async def _accept(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            conn, peer = await loop.sock_accept(self._listener)
            if len(self._connections) >= self._config.max_connections:
                LOG.warning("connection from %s closed: max_connections %d reached", peer,
                            self._config.max_connections)
                conn.close()
                continue
            conn.setblocking(False)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            task = loop.create_task(self._serve(conn, peer))
            self._connections.add(task)
            task.add_done_callback(self._connections.discard)

    async def _serve(self, conn: socket.socket, peer) -> None:
        """Requests of one connection until it closes, fails, or the server stops."""
        try:
            while True:
                frame = await self._read_frame(conn)
                if frame is None:
                    return
                parts = await self._apis.handle(frame)
                if parts:
                    await self._send(conn, parts)
        except BadRequest as e:
            LOG.info("connection from %s closed: %s", peer, e)
        except (ConnectionError, OSError):
            pass  # the client went away
        except Exception as e:  # a bug: this connection closes, the server lives on
            LOG.error("connection from %s closed by a failure", peer, exc_info=e)
        finally:
            conn.close()

    async def _read_frame(self, conn) -> bytearray | None:
        """The next request frame, or None at a clean end of stream."""
        head = await _recv_exactly(conn, _SIZE_BYTES, eof_ok=True)
        if head is None:
            return None
        size = int.from_bytes(head, "big", signed=True)
        limit = self._config.socket_request_max_bytes
        if not 0 < size <= limit:
            raise BadRequest(f"request size {size} is outside [1, {limit}] (socket_request_max_bytes)")
        return await _recv_exactly(conn, size, eof_ok=False)

    async def _send(self, conn, parts: list) -> None:
        """Bytes with ``sock_sendall``; a fetched range with ``FetchData.transfer_to``
        (``os.sendfile``) in the network pool. The socket is never closed while a send
        runs in a thread: a cancelled send shuts the socket down and waits for it, so its
        descriptor cannot be reused under it."""
        loop = asyncio.get_running_loop()
        for part in parts:
            if isinstance(part, (bytes, bytearray)):
                await loop.sock_sendall(conn, part)
                continue
            send = loop.run_in_executor(self._apis.network_pool, part.transfer_to, conn)
            try:
                sent = await asyncio.shield(send)
            except asyncio.CancelledError:
                conn.shutdown(socket.SHUT_RDWR)
                await asyncio.wait([send])
                raise
            if sent != part.size_bytes:
                raise ConnectionError(f"sent {sent} of {part.size_bytes} bytes of a segment range")

    async def close(self) -> None:
        """Stop accepting, then end every connection (its request in progress is cancelled;
        appends already handed to the disk pool finish there)."""
        if self._accepting is not None:
            self._accepting.cancel()
            await asyncio.gather(self._accepting, return_exceptions=True)
        self._listener.close()
        tasks = list(self._connections)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _recv_exactly(conn, size: int, *, eof_ok: bool) -> bytearray | None:
    """``size`` bytes from ``conn``; None if the stream ends before the first (``eof_ok``),
    else ``ConnectionError`` for a stream that ends early."""
    loop = asyncio.get_running_loop()
    buffer = bytearray(size)
    view, got = memoryview(buffer), 0
    while got < size:
        n = await loop.sock_recv_into(conn, view[got:])
        if n == 0:
            if got == 0 and eof_ok:
                return None
            raise ConnectionError(f"connection ended {got} bytes into {size}")
        got += n
    return buffer
