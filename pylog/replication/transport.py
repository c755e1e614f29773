"""How a follower reaches its leader. ``InProcessEndpoint`` calls the leader's ``Replica``
directly (followers as threads of one process); ``TcpEndpoint`` and ``ReplicaServer``
carry the same two requests over TCP (docs/format/replication.md), the leader sending the
record bytes with ``FetchData.transfer_to`` (sendfile, zero copy)."""

from __future__ import annotations

import socket
import threading

from pylog.arguments import check_int
from pylog.errors import InvalidArgumentError, NotLeaderOrFollowerError, PylogError, ReplicaTransportError
from pylog.replication import wire
from pylog.replication.client_requests import consumer_fetch
from pylog.replication.protocol import NOT_LEADER_OR_FOLLOWER, EpochEndOffset, FetchRequest, FetchResponse

#: The header of a fetch response goes out with the first record bytes, in one segment
#: (Linux; elsewhere on its own).
_MSG_MORE = getattr(socket, "MSG_MORE", 0)


class InProcessEndpoint:
    """The leader ``Replica`` of this process."""

    def __init__(self, replica):
        self.replica = replica

    def fetch(self, req: FetchRequest) -> tuple[FetchResponse, bytes]:
        if not self.replica.online:
            raise NotLeaderOrFollowerError(f"replica {self.replica.replica_id} is offline")
        resp = self.replica.handle_fetch(req)
        raw = resp.record_bytes()
        resp.records = None
        return resp, raw

    def offsets_for_leader_epoch(self, replica_id: int, current_leader_epoch: int, epoch: int) -> EpochEndOffset:
        if not self.replica.online:
            raise NotLeaderOrFollowerError(f"replica {self.replica.replica_id} is offline")
        return self.replica.handle_offsets_for_leader_epoch(current_leader_epoch, epoch)


class TcpEndpoint:
    """A leader in another process, reached over TCP (docs/format/replication.md). One
    request at a time on one connection; a broken connection raises
    :class:`ReplicaTransportError` and is opened again on the next request.
    ``reuse_buffer``: receive every fetch's records into one buffer and return a view of
    it, valid until the next fetch (for a follower, which appends before fetching again):
    no ``max_bytes`` to allocate and fault in per fetch."""

    def __init__(self, address: tuple[str, int], *, timeout_s: float = 30.0, reuse_buffer: bool = False):
        self.address = address
        self.timeout_s = timeout_s
        self._records_buffer = bytearray() if reuse_buffer else None
        self._sock = None
        self._correlation_id = 0

    def _connection(self):
        if self._sock is None:
            try:
                self._sock = socket.create_connection(self.address, timeout=self.timeout_s)
            except OSError as e:
                raise ReplicaTransportError(f"cannot connect to the leader at {self.address}: {e}") from None
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return self._sock

    def _exchange(self, frame: bytes, read, *, timeout_s: float | None = None):
        """Send ``frame`` and ``read`` the answer, waiting up to ``timeout_s`` (default:
        the endpoint's) for it."""
        sock = self._connection()
        try:
            sock.settimeout(self.timeout_s if timeout_s is None else timeout_s)
            sock.sendall(frame)
            return read(sock)
        except BaseException:
            self.close()
            raise

    def _next_id(self) -> int:
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        return self._correlation_id

    def fetch(self, req: FetchRequest) -> tuple[FetchResponse, bytes]:
        """Send a fetch, return the response and every byte of its records (read whole
        before anything is appended; a view of the endpoint's buffer with ``reuse_buffer``)."""
        cid = self._next_id()

        def read(sock):  # the length and the header in one read, then the records
            head = wire.read_exactly(sock, wire.SIZE.size + wire.FETCH_RESPONSE.size, "a fetch response header")
            (size,) = wire.SIZE.unpack_from(head)
            got_cid, resp, records_size = wire.decode_fetch_response_header(head[wire.SIZE.size:])
            if got_cid != cid or size != wire.FETCH_RESPONSE.size + records_size:
                raise ReplicaTransportError(f"fetch response {got_cid} of {size} bytes does not answer request "
                                            f"{cid} ({records_size} bytes of records)")
            return resp, wire.read_exactly(sock, records_size, f"{records_size} bytes of fetched records",
                                           into=self._buffer_for(records_size))
        try:
            return self._exchange(wire.encode_fetch_request(cid, req), read)
        except socket.timeout:
            raise ReplicaTransportError(f"no fetch response from {self.address} in {self.timeout_s} s") from None

    def _buffer_for(self, size: int) -> bytearray | None:
        """The reused buffer, replaced by a larger one when ``size`` does not fit (never
        resized in place: a view of it may still be held); None without ``reuse_buffer``."""
        if self._records_buffer is not None and len(self._records_buffer) < size:
            self._records_buffer = bytearray(size)
        return self._records_buffer

    def offsets_for_leader_epoch(self, replica_id: int, current_leader_epoch: int, epoch: int) -> EpochEndOffset:
        cid = self._next_id()

        def read(sock):
            got_cid, answer = wire.decode_epoch_response(wire.read_frame(sock, "an OffsetsForLeaderEpoch response"))
            if got_cid != cid:
                raise ReplicaTransportError(f"response {got_cid} does not answer request {cid}")
            return answer
        return self._exchange(wire.encode_epoch_request(cid, replica_id, current_leader_epoch, epoch), read)

    def close(self) -> None:
        """Close the connection; a request waiting on it (in another thread) fails at once."""
        if self._sock is not None:
            sock, self._sock = self._sock, None
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already broken
            sock.close()


class ReplicaServer:
    """Serves a leader ``Replica``'s fetches over TCP on ``host`` (loopback by default),
    a thread per connection; the records go out with ``FetchData.transfer_to`` (sendfile).
    Fetches from clients (replica id < 0) are answered as ``consumer_fetch`` says;
    ``handlers`` maps further API keys to ``handler(correlation_id, request) -> response
    frame``."""

    def __init__(self, replica, *, host: str = "127.0.0.1", port: int = 0, handlers=None):
        if not isinstance(host, str):
            raise InvalidArgumentError(f"host must be a str (a name or an address), not {host!r}")
        check_int(port, "port", (0, 65535))
        self.replica = replica
        self._handlers = dict(handlers or {})
        try:
            self._listener = socket.create_server((host, port))
        except OSError as e:
            raise ReplicaTransportError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
        self.address = self._listener.getsockname()[:2]
        self._closed = threading.Event()
        self._connections: set = set()
        self._thread = threading.Thread(target=self._accept, name=f"replica-server-{replica.replica_id}",
                                        daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        self._listener.settimeout(0.1)  # so that close() is seen
        while not self._closed.is_set():
            try:
                conn, _ = self._listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            conn.settimeout(None)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._connections.add(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn) -> None:
        try:
            while not self._closed.is_set():
                api, cid, body = wire.decode_request(wire.read_frame(conn, "a request"))
                if api == wire.FETCH:
                    self._send_fetch(conn, cid, body)
                elif api in self._handlers:
                    conn.sendall(self._handlers[api](cid, body))
                else:
                    replica_id, current, epoch = body
                    conn.sendall(wire.encode_epoch_response(
                        cid, self.replica.handle_offsets_for_leader_epoch(current, epoch)))
        except (PylogError, OSError):
            pass  # the follower went away or spoke out of turn, or the log closed: drop the connection
        finally:
            self._connections.discard(conn)
            conn.close()

    def _send_fetch(self, conn, cid: int, req: FetchRequest) -> None:
        if not self.replica.online:
            resp = FetchResponse(NOT_LEADER_OR_FOLLOWER, self.replica.leader_epoch)
        elif req.replica_id < 0:
            resp = consumer_fetch(self.replica, req)
        else:
            resp = self.replica.handle_fetch(req)
        records = resp.records
        size = 0 if records is None else records.size_bytes
        conn.sendall(wire.fetch_response_header(cid, resp, size), _MSG_MORE if size else 0)
        if size and records.transfer_to(conn) != size:  # the log was cut meanwhile: the frame cannot end
            raise ReplicaTransportError(f"fetched records of replica {self.replica.replica_id} were cut "
                                        f"while being sent")

    def close(self) -> None:
        self._closed.set()
        self._thread.join()
        self._listener.close()
        for conn in list(self._connections):
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
