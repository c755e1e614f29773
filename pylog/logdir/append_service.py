"""Appends served by the process that holds a partition's writer, for the other processes
of the host: one round trip on a Unix-domain socket instead of a hand-off of the log (a
close, which flushes, and an open: tens of milliseconds).

The holder (:class:`AppendServer`, one thread per writer pool) listens on the partition's
socket, an abstract Unix-domain socket named after the log dir and the partition (Linux;
elsewhere nobody listens and every append goes through a hand-off). It accepts only
processes of its own user (``SO_PEERCRED``). A request carries the records of one append;
the holder appends them with ``Log.append`` and answers once they are in the log, in the
operating system's page cache: the acknowledgement of an append of its own, which a
SIGKILL of either process after it does not undo. The kernel frees the name when the
holder closes the socket or dies.

:class:`AppendClient` sends a request and returns False when nobody appended for it: no
process listens, the holder gave the log up meanwhile ("not held"), or the connection
broke (the holder died, its writer lock with it). The caller then appends itself. A holder
that died after appending but before answering leaves the records in the log, and the
caller appends them again: only records whose repetition changes nothing (the
coordinators' keyed records, where the last one wins) go through here.

A request carries the caller's deadline (``time.monotonic_ns``, one clock for the whole
host): a holder that gets to it too late drops it, so a caller that gave up (and released
the group's lock) does not see its records appended behind a later commit.

Wire format (big-endian): a request is ``int32 length`` then ``int64 deadline, int16 topic
length, topic, int32 partition, int32 count`` and per record ``int32 key length, key, int32 value length,
value`` (-1: null); an answer is ``int32 length, int8 status`` (0 appended, 1 not held, 2
failed, 3 too late) and, when failed, ``int16 error class length, error class, message``.

Cost: a connect per process and partition, then a round trip (about 0.1 ms) per append.
"""

from __future__ import annotations

import hashlib
import os
import selectors
import socket
import struct
import sys
import threading
import time
import weakref

from pylog import errors
from pylog.errors import LogLockedError, PylogError

_LEN, _I16, _I32 = struct.Struct(">i"), struct.Struct(">h"), struct.Struct(">i")
_APPENDED, _NOT_HELD, _FAILED, _TOO_LATE = 0, 1, 2, 3
_I64 = struct.Struct(">q")
_PEERCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
#: How long the holder waits for the rest of a request that has begun.
REQUEST_TIMEOUT_S = 5.0
SUPPORTED = sys.platform.startswith("linux") and hasattr(socket, "AF_UNIX")
_instances: "weakref.WeakSet" = weakref.WeakSet()  # servers and clients, for a forked child


def _forget_parent_sockets() -> None:
    """In a forked child: the parent's listeners and connections are not the child's. The
    child closes its copies (a listener kept open here would keep the name bound after
    the parent let the log go, and answer nobody; a shared connection would mix requests)."""
    for instance in list(_instances):
        instance._forget_in_child()


os.register_at_fork(after_in_child=_forget_parent_sockets)


def socket_name(root: str, topic: str, partition: int) -> bytes:
    """The abstract socket of partition ``topic-partition`` of log dir ``root``."""
    digest = hashlib.blake2b(f"{os.path.realpath(root)}\0{topic}-{partition}".encode(), digest_size=16)
    return b"\0pylog-append-" + digest.hexdigest().encode()


def _encode_request(deadline_ns: int, topic: str, partition: int, records) -> bytes:
    parts = [_I64.pack(deadline_ns), _string(topic), _I32.pack(partition), _I32.pack(len(records))]
    for key, value in records:
        parts += [_bytes(key), _bytes(value)]
    body = b"".join(parts)
    return _LEN.pack(len(body)) + body


def _decode_request(body: bytes) -> tuple[int, tuple[str, int], list]:
    view = memoryview(body)
    (deadline_ns,) = _I64.unpack_from(view, 0)
    topic_bytes, pos = _read(view, _I64.size, _I16)
    partition, count = struct.unpack_from(">ii", view, pos)
    pos += 8
    records = []
    for _ in range(count):
        key, pos = _read(view, pos, _I32)
        value, pos = _read(view, pos, _I32)
        records.append((key, value))
    return deadline_ns, (topic_bytes.decode(), partition), records


def _read(view: memoryview, pos: int, length: struct.Struct):
    (n,) = length.unpack_from(view, pos)
    pos += length.size
    if n < 0:
        return None, pos
    return bytes(view[pos:pos + n]), pos + n


def _string(text: str) -> bytes:
    raw = text.encode()
    return _I16.pack(len(raw)) + raw


def _bytes(raw) -> bytes:
    return _I32.pack(-1) if raw is None else _I32.pack(len(raw)) + bytes(raw)


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(n - got)
        if not chunk:
            raise ConnectionResetError("connection closed")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _recv_message(sock: socket.socket) -> bytes:
    (n,) = _LEN.unpack(_recv_exactly(sock, _LEN.size))
    return _recv_exactly(sock, n)


class AppendServer:
    """Listens for the partitions :meth:`listen` names and appends what other processes
    send through ``append(key, records)``, which returns False if this process no longer
    holds the partition's log (and raises what ``Log.append`` raises)."""

    def __init__(self, root: str, append):
        self.root = root
        self._append = append
        self._selector = selectors.DefaultSelector()
        self._listeners: dict[tuple[str, int], socket.socket] = {}
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = socket.socketpair()
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._stop = False
        self._thread: threading.Thread | None = None
        #: Appends served for other processes (their records are in the log).
        self.served = 0
        _instances.add(self)

    def _forget_in_child(self) -> None:
        for selected in list(self._selector.get_map().values()):
            selected.fileobj.close()  # this process's copies; the parent's stay open
        self._selector.close()
        self._wake_w.close()
        self.__init__(self.root, self._append)

    def listen(self, key: tuple[str, int]) -> None:
        """Serve appends to ``key`` from now on (idempotent; the caller holds its log)."""
        if not SUPPORTED or key in self._listeners:
            return
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(socket_name(self.root, *key))
        except OSError:  # another process holds the name: it is giving the log up to us
            listener.close()
            return
        listener.listen(16)
        listener.setblocking(False)
        with self._lock:
            self._listeners[key] = listener
            self._selector.register(listener, selectors.EVENT_READ, key)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="pylog-append-server", daemon=True)
                self._thread.start()
        self._wake()

    def unlisten(self, key: tuple[str, int]) -> None:
        """Stop listening for ``key`` (before its log is handed over); open connections
        are answered "not held" from now on."""
        with self._lock:
            listener = self._listeners.pop(key, None)
            if listener is not None:
                self._selector.unregister(listener)
                listener.close()

    def close(self) -> None:
        _instances.discard(self)
        for key in list(self._listeners):
            self.unlisten(key)
        self._stop = True
        self._wake()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"\0")
        except OSError:
            pass

    def _loop(self) -> None:
        while not self._stop:
            for selected, _ in self._selector.select():
                sock, key = selected.fileobj, selected.data
                if sock is self._wake_r:
                    self._wake_r.recv(4096)
                elif key is not None:
                    self._accept(sock)
                else:
                    self._serve(sock)
        with self._lock:
            for selected in list(self._selector.get_map().values()):
                if selected.fileobj is not self._wake_r:
                    self._selector.unregister(selected.fileobj)
                    selected.fileobj.close()

    def _accept(self, listener: socket.socket) -> None:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        _, uid, _ = _PEERCRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size))
        if uid not in (os.getuid(), 0):
            conn.close()
            return
        conn.settimeout(REQUEST_TIMEOUT_S)
        with self._lock:
            self._selector.register(conn, selectors.EVENT_READ, None)

    def _serve(self, conn: socket.socket) -> None:
        """Answer one request of ``conn``; close it when it ends or misbehaves."""
        try:
            deadline_ns, key, records = _decode_request(_recv_message(conn))
            conn.sendall(self._answer(deadline_ns, key, records))
        except (OSError, struct.error, UnicodeDecodeError):
            with self._lock:
                self._selector.unregister(conn)
            conn.close()

    def _answer(self, deadline_ns: int, key: tuple[str, int], records: list) -> bytes:
        if time.monotonic_ns() > deadline_ns:  # the caller gave up
            return _LEN.pack(1) + bytes([_TOO_LATE])
        try:
            status = _APPENDED if self._append(key, records) else _NOT_HELD
        except PylogError as e:
            body = bytes([_FAILED]) + _string(type(e).__name__) + str(e).encode()
            return _LEN.pack(len(body)) + body
        self.served += status == _APPENDED
        return _LEN.pack(1) + bytes([status])


class AppendClient:
    """This process's connections to the holders of the partitions of ``root`` it sends
    appends to (one per partition, kept)."""

    def __init__(self, root: str):
        self.root = root
        self._lock = threading.Lock()  # one request at a time per process: appends to a partition serialize anyway
        self._connections: dict[tuple[str, int], socket.socket] = {}
        _instances.add(self)

    def _forget_in_child(self) -> None:
        for conn in self._connections.values():
            conn.close()
        self.__init__(self.root)

    def append(self, key: tuple[str, int], records: list, deadline: float) -> bool:
        """Have the holder of ``key``'s log append ``records``; True once they are in the
        log, False if nobody appended them (the caller appends itself). Raises what the
        holder's ``Log.append`` raised, or :class:`LogLockedError` if the holder does not
        answer before ``deadline`` (``time.monotonic()``; the records may then be
        appended later)."""
        if not SUPPORTED:
            return False
        request = _encode_request(int(deadline * 1e9), *key, records)
        with self._lock:
            try:
                conn = self._connection(key)
                if conn is None:
                    return False
                conn.settimeout(max(deadline - time.monotonic(), 0.001))
                conn.sendall(request)
                answer = _recv_message(conn)
                if answer[0] == _TOO_LATE:
                    raise TimeoutError
            except TimeoutError:
                self._drop(key)
                raise LogLockedError(f"the process writing {key[0]}-{key[1]} in {self.root} did not answer "
                                     "in time") from None
            except OSError:  # the holder closed or died
                self._drop(key)
                return False
        if answer[0] == _FAILED:
            raise _error(answer[1:])
        if answer[0] == _NOT_HELD:
            self._drop(key)
        return answer[0] == _APPENDED

    def _connection(self, key: tuple[str, int]) -> socket.socket | None:
        conn = self._connections.get(key)
        if conn is None:
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                conn.connect(socket_name(self.root, *key))
            except OSError:  # nobody listens
                conn.close()
                return None
            self._connections[key] = conn
        return conn

    def _drop(self, key: tuple[str, int]) -> None:
        conn = self._connections.pop(key, None)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        _instances.discard(self)
        with self._lock:
            for key in list(self._connections):
                self._drop(key)


def _error(body: bytes) -> PylogError:
    """The holder's error, as the class it raised where it can be built from a message."""
    name, pos = _read(memoryview(body), 0, _I16)
    message = body[pos:].decode(errors="replace")
    cls = getattr(errors, name.decode(), None)
    if isinstance(cls, type) and issubclass(cls, PylogError):
        try:
            return cls(message)
        except TypeError:
            pass
    return PylogError(f"{name.decode()}: {message}")
