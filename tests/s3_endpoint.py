"""The tests' S3: a real S3 HTTP endpoint on 127.0.0.1, and a proxy in front of it that injects faults.

The endpoint is moto's server mode (``moto.server.ThreadedMotoServer``), started once per test
session by the ``s3`` fixture (``tests/conftest.py`` makes it available to every test):

- ``s3.endpoint_url``: ``http://127.0.0.1:<port>``;
- ``s3.storage_options``: fsspec/s3fs options for it (pandas' and pylog's ``storage_options``);
- ``s3.bucket(name=None) -> str``: creates a fresh bucket (``pylog-test-<n>``) and returns its name;
- ``s3.url(bucket, *parts) -> "s3://bucket/part/..."``;
- ``s3.upload_dir(local_dir, url)``: copies the tree under ``local_dir`` to below ``url``;
- ``s3.hadoop_conf``: the ``spark.hadoop.fs.s3a.*`` settings for Spark's S3A (``s3a://``, ``s3://``);
- ``s3.faulty(*plan) -> FaultyS3``: a loopback HTTP proxy forwarding to moto that answers the
  requests matching each :class:`Fault` of ``plan`` with 503 SlowDown, 500 InternalError or a
  stall, ``times`` times each, and records every request it sees (``.requests``, ``.count()``).
  ``.storage_options`` point at the proxy. One proxy serves the session; each ``faulty`` call
  replaces the plan and clears the record.

Without s3fs or moto's server (``pip install -e '.[dev]'``) the tests that use ``s3`` skip,
naming what is missing; with the environment variable ``CI`` set they fail instead.
"""

from __future__ import annotations

import http.client
import http.server
import itertools
import logging
import os
import select
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REGION = "us-east-1"
ACCESS_KEY = "pylog-test-access-key"
SECRET_KEY = "pylog-test-secret-4f1c9e"  # tests assert it never shows in errors or logs

_ERRORS = {
    "slowdown": (503, "SlowDown", "Please reduce your request rate."),
    "error": (500, "InternalError", "We encountered an internal error. Please try again."),
}


@dataclass
class Fault:
    """One rule of a fault plan: requests with ``method`` (any when None) whose path (the
    bucket and key, unquoted, with its query) contains ``path`` get ``reply`` instead of
    moto's answer, ``times`` times (then they are forwarded):

    - ``"slowdown"``: 503 SlowDown, S3's throttling answer;
    - ``"error"``: 500 InternalError;
    - ``"stall"``: no answer until the client hangs up or ``stall_s`` passes, then the
      connection is closed (set the client's ``read_timeout`` below ``stall_s``).
    """
    reply: str
    times: float = 1
    method: str | None = None
    path: str = ""
    stall_s: float = 30.0

    def __post_init__(self):
        if self.reply not in (*_ERRORS, "stall"):
            raise ValueError(f"unknown fault reply {self.reply!r}: slowdown, error or stall")

    def matches(self, method: str, path: str) -> bool:
        return self.times > 0 and (self.method is None or self.method == method) and self.path in path


@dataclass(frozen=True)
class Request:
    """A request the proxy saw: method, path (unquoted, with query), Range header, and what
    it got: ``"forwarded"`` or the fault's reply."""
    method: str
    path: str
    range: str | None
    answer: str


@dataclass
class _Plan:
    faults: list[Fault] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, method: str, path: str, range_header: str | None) -> Fault | None:
        with self.lock:
            fault = next((f for f in self.faults if f.matches(method, path)), None)
            if fault is not None:
                fault.times -= 1
            self.requests.append(Request(method, path, range_header, fault.reply if fault else "forwarded"))
            return fault


class _ProxyHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as S3 clients expect

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass

    def _handle(self):
        from urllib.parse import unquote

        body = self._body()
        fault = self.server.plan.answer(self.command, unquote(self.path), self.headers.get("Range"))
        if fault is None:
            self._forward(body)
        elif fault.reply == "stall":
            self._stall(fault.stall_s)
        else:
            self._error(*_ERRORS[fault.reply])

    def _body(self) -> bytes | None:
        """The request's body, read whole (chunked or sized)."""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while size := int(self.rfile.readline().split(b";")[0], 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass  # trailers
            del self.headers["Transfer-Encoding"]
            body = b"".join(chunks)
            self.headers["Content-Length"] = str(len(body))
            return body
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else None

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

    def _forward(self, body: bytes | None):
        upstream = http.client.HTTPConnection("127.0.0.1", self.server.upstream_port, timeout=60)
        try:
            upstream.request(self.command, self.path, body=body, headers=dict(self.headers.items()))
            response = upstream.getresponse()
            data = response.read()
        finally:
            upstream.close()
        self.send_response(response.status, response.reason)
        for name, value in response.getheaders():
            if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _error(self, status: int, code: str, message: str):
        body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
                f"<Message>{message}</Message><RequestId>pylog-fault</RequestId></Error>").encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _stall(self, stall_s: float):
        """Answer nothing until the client hangs up (its read timeout) or ``stall_s`` passes."""
        deadline = time.monotonic() + stall_s
        while (remaining := deadline - time.monotonic()) > 0:
            readable, _, _ = select.select([self.connection], [], [], remaining)
            if readable and not self.connection.recv(1, socket.MSG_PEEK):
                break  # the client closed the connection
        self.close_connection = True


class _Proxy(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, upstream_port: int):
        super().__init__(("127.0.0.1", 0), _ProxyHandler)
        self.upstream_port = upstream_port
        self.plan = _Plan()
        self.thread = threading.Thread(target=self.serve_forever, name="s3-fault-proxy", daemon=True)
        self.thread.start()

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def stop(self):
        self.shutdown()
        self.server_close()


class FaultyS3:
    """The fault-injecting proxy with one plan (:meth:`S3Endpoint.faulty`)."""

    def __init__(self, proxy: _Proxy, plan: _Plan):
        self._proxy, self._plan = proxy, plan
        self.endpoint_url = proxy.endpoint_url
        self.storage_options = _storage_options(self.endpoint_url)

    @property
    def requests(self) -> list[Request]:
        with self._plan.lock:
            return list(self._plan.requests)

    def count(self, method: str | None = None, path: str = "", answer: str | None = None) -> int:
        """How many requests with ``method`` (any when None), a path containing ``path`` and
        the given ``answer`` (any when None) the proxy saw."""
        return sum(1 for r in self.requests if (method is None or r.method == method) and path in r.path
                   and (answer is None or r.answer == answer))

    def clear(self) -> None:
        """Forget the requests seen so far (the plan stays)."""
        with self._plan.lock:
            self._plan.requests.clear()


def _storage_options(endpoint_url: str) -> dict:
    return {"key": ACCESS_KEY, "secret": SECRET_KEY,
            "client_kwargs": {"endpoint_url": endpoint_url, "region_name": REGION}}


class S3Endpoint:
    """moto's S3 server on loopback (module docstring)."""

    Fault = Fault

    def __init__(self):
        import boto3
        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._server.start()
        self.port = self._server.get_host_and_port()[1]
        self.endpoint_url = f"http://127.0.0.1:{self.port}"
        self.storage_options = _storage_options(self.endpoint_url)
        self.client = boto3.client("s3", endpoint_url=self.endpoint_url, region_name=REGION,
                                   aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)
        self._names = itertools.count()
        self._proxy: _Proxy | None = None

    def bucket(self, name: str | None = None) -> str:
        """Create a bucket (a fresh ``pylog-test-<n>`` when ``name`` is None); its name."""
        name = name or f"pylog-test-{os.getpid()}-{next(self._names)}"
        self.client.create_bucket(Bucket=name)
        return name

    @staticmethod
    def url(bucket: str, *parts: str) -> str:
        """``s3://bucket/part/...``."""
        return "/".join([f"s3://{bucket}", *(p.strip("/") for p in parts)])

    def upload_dir(self, local_dir, url: str) -> None:
        """Copy every file below ``local_dir`` to the same relative key below ``url``."""
        from pylog.remote.store import ObjectStore

        store = ObjectStore.from_url(url, self.storage_options)
        local_dir = Path(local_dir)
        for path in sorted(p for p in local_dir.rglob("*") if p.is_file()):
            store.put_file(path.relative_to(local_dir).as_posix(), path)

    @property
    def hadoop_conf(self) -> dict[str, str]:
        """Spark settings for Hadoop's S3A on this endpoint (``s3a://`` and ``s3://``)."""
        s3a = "org.apache.hadoop.fs.s3a.S3AFileSystem"
        return {
            "spark.hadoop.fs.s3a.endpoint": self.endpoint_url,
            "spark.hadoop.fs.s3a.endpoint.region": REGION,
            "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
            "spark.hadoop.fs.s3a.access.key": ACCESS_KEY,
            "spark.hadoop.fs.s3a.secret.key": SECRET_KEY,
            "spark.hadoop.fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
            "spark.hadoop.fs.s3a.impl": s3a,
            "spark.hadoop.fs.s3.impl": s3a,
        }

    def faulty(self, *plan: Fault | list[Fault]) -> FaultyS3:
        """The fault proxy answering by ``plan`` (faults, or lists of them; module docstring),
        its record cleared."""
        if self._proxy is None:
            self._proxy = _Proxy(self.port)
        faults = [f for item in plan for f in (item if isinstance(item, (list, tuple)) else [item])]
        with self._proxy.plan.lock:
            self._proxy.plan.faults = faults
            self._proxy.plan.requests.clear()
        return FaultyS3(self._proxy, self._proxy.plan)

    def stop(self) -> None:
        if self._proxy is not None:
            self._proxy.stop()
        self._server.stop()


def _unavailable(reason: str):
    """Skip, or fail when running in CI, where the endpoint must be present."""
    if os.environ.get("CI"):
        pytest.fail(f"CI: {reason}", pytrace=False)
    pytest.skip(reason)


def missing_packages() -> list[str]:
    """The packages the endpoint needs that are not installed."""
    import importlib.util

    wanted = {"s3fs": "s3fs", "moto[server]": "moto.server", "boto3": "boto3", "flask": "flask"}
    out = []
    for name, module in wanted.items():
        try:
            found = importlib.util.find_spec(module) is not None
        except ImportError:
            found = False
        if not found:
            out.append(name)
    return out


@pytest.fixture(scope="session")
def s3() -> S3Endpoint:
    missing = missing_packages()
    if missing:
        _unavailable(f"{', '.join(missing)} not installed: the object storage tests need a loopback S3 "
                     f"endpoint (pip install -e '.[dev]')")
    endpoint = S3Endpoint()
    yield endpoint
    endpoint.stop()
