"""``ObjectStore``: the one seam between pylog and object storage (S3, GCS, Azure, local files).

An ``ObjectStore`` is one fsspec filesystem and a root path below it; keys are ``/``-separated
and relative to the root. ``storage_options`` is the dict pandas and pyarrow take (fsspec's),
passed to the filesystem as given.

Faults: retries and timeouts are the client library's own. For S3 (s3fs over botocore), where
the caller's ``storage_options`` leave them out, the defaults are:

- ``config_kwargs["retries"] = {"mode": "standard", "total_max_attempts": 5}``: botocore
  retries throttling (503 SlowDown), 5xx, timeouts and broken connections with jittered
  exponential backoff (up to 1, 2, 4, 8 s), 5 attempts in all per request (botocore's
  ``max_attempts`` counts the retries only);
- ``config_kwargs["connect_timeout"] = 5`` and ``config_kwargs["read_timeout"] = 15``
  (seconds): a stalled request fails after that and is retried as above;
- ``retries = 2``: s3fs's own loop around each call (it also retries a body read that broke
  midway, which botocore does not see). s3fs nests that loop (around the call and around
  the read), so a persistent fault costs up to ``retries² × total_max_attempts`` requests;
- ``use_listings_cache = False``: :meth:`ObjectStore.list` always asks the store (callers cache).

Other backends (gcsfs, adlfs) keep their own defaults. Once the library gives up, the
failure is a :class:`~pylog.errors.StorageError` naming the object's URL and what failed; a
missing object is a :class:`~pylog.errors.RemoteObjectNotFoundError`. Credentials (in
``storage_options`` or a URL's ``user:password@``) never appear in errors or ``repr``.
"""

from __future__ import annotations

import copy
import os
import re
from urllib.parse import unquote

from pylog.errors import (
    InvalidArgumentError, MissingDependencyError, PylogError, RemoteObjectNotFoundError, StorageError,
)

#: URL schemes naming object storage (or a local/in-memory filesystem through the same seam).
SCHEMES = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "file", "memory"})
_SCHEME_ALIASES = {"s3a": "s3"}  # Hadoop's name for S3
_EXTRAS = {"s3": "s3", "gs": "gcs", "gcs": "gcs", "az": "azure", "abfs": "azure", "abfss": "azure"}
_S3_DEFAULTS = {"retries": 2, "use_listings_cache": False}
_S3_CONFIG_DEFAULTS = {"retries": {"mode": "standard", "total_max_attempts": 5},
                       "connect_timeout": 5, "read_timeout": 15}

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
# user:password@ in a URL (a bare name@, as Azure's container@account, is no credential)
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^/@\s:]*):(?P<password>[^/@\s]*)@")
_SECRET_QUERY = re.compile(
    r"(?P<name>[?&](?:sig|signature|x-amz-signature|x-amz-credential|x-amz-security-token|token|"
    r"secret|password|access_key|key)=)[^&#\s]*", re.IGNORECASE)


def is_url(text) -> bool:
    """Whether ``text`` names object storage: ``s3://``, ``s3a://``, ``gs://``, ``gcs://``,
    ``az://``, ``abfs://``, ``abfss://``, ``file://`` or ``memory://``. A plain path (or a
    ``Path``) is not a URL. No I/O.

    >>> is_url("s3a://bucket/logs"), is_url("/data/logs")
    (True, False)
    """
    if not isinstance(text, str):
        return False
    m = _URL.match(text)
    return bool(m) and m.group(1).lower() in SCHEMES


def redact(text: str) -> str:
    """``text`` with the credentials of every URL in it removed: a ``user:password@`` and the
    values of query parameters carrying signatures, tokens or keys. No I/O.

    >>> redact("s3://AKIA:hunter2@bucket/logs?sig=abc&x=1")
    's3://bucket/logs?sig=***&x=1'
    """
    text = _USERINFO.sub(r"\g<scheme>", text)
    return _SECRET_QUERY.sub(r"\g<name>***", text)


def _split_credentials(url: str, storage_options: dict) -> tuple[str, dict]:
    """``url`` without its ``key:secret@`` (S3 only, as Hadoop's old ``s3a://key:secret@bucket``),
    and ``storage_options`` with them added where not already given."""
    m = _USERINFO.match(url)
    if not m:
        return url, storage_options
    scheme = m.group("scheme")[:-3].lower()
    if _SCHEME_ALIASES.get(scheme, scheme) != "s3":
        raise InvalidArgumentError(f"credentials in a {scheme}:// URL are not supported, pass them "
                                   f"in storage_options: {redact(url)}")
    options = dict(storage_options)
    options.setdefault("key", unquote(m.group("user")))
    options.setdefault("secret", unquote(m.group("password")))
    return m.group("scheme") + url[m.end():], options


def _with_defaults(scheme: str, storage_options: dict) -> dict:
    """The S3 retry, timeout and listing defaults (module docstring) under the caller's options."""
    if scheme != "s3":
        return storage_options
    options = {**_S3_DEFAULTS, **storage_options}
    options["config_kwargs"] = copy.deepcopy({**_S3_CONFIG_DEFAULTS, **(storage_options.get("config_kwargs") or {})})
    return options


def _parse(url: str, storage_options: dict) -> tuple[str | None, str, dict]:
    """``url``'s scheme (``s3a`` as ``s3``; None for a local path), the URL to open (without
    credentials) and the options to open it with (the caller's, then the URL's credentials,
    then the defaults)."""
    m = _URL.match(url)
    scheme = m.group(1).lower() if m else None
    if scheme is not None and scheme not in SCHEMES:
        raise InvalidArgumentError(f"unknown object storage scheme {scheme}:// in {redact(url)}; "
                                   f"known: {', '.join(sorted(SCHEMES))}")
    scheme = _SCHEME_ALIASES.get(scheme, scheme)
    if m:
        url = f"{scheme}://{url[m.end():]}"
    url, options = _split_credentials(url, storage_options)
    if scheme in (None, "file"):
        options.setdefault("auto_mkdir", True)
    return scheme, url, _with_defaults(scheme, options)


def _open_filesystem(scheme: str | None, url: str, options: dict):
    """fsspec's filesystem for ``url`` and the root path in it; pylog's errors for bad input."""
    import fsspec.core

    retries = options.pop("retries", None) if scheme == "s3" else None  # an s3fs attribute
    if retries is not None and retries != _S3_DEFAULTS["retries"]:
        options["skip_instance_cache"] = True  # not shared with stores of another count
    try:
        fs, root = fsspec.core.url_to_fs(url, **options)
    except ImportError as e:
        extra = _EXTRAS.get(scheme, scheme)
        raise MissingDependencyError(f"reading {scheme}:// needs the package of the extra "
                                     f"'{extra}': pip install 'pylog-kafka[{extra}]' ({e})") from None
    except (ValueError, TypeError) as e:
        raise InvalidArgumentError(f"cannot open object storage at {redact(url)}: {redact(str(e))}") from None
    except _errors() as e:  # a backend that looks up credentials when made
        raise StorageError(f"opening {redact(url)} failed: {type(e).__name__}: {redact(str(e))}") from None
    root = root.rstrip("/") or root
    if scheme not in (None, "file", "memory") and not root.strip("/"):
        raise InvalidArgumentError(f"{redact(url)} names no bucket or container")
    if retries is not None:
        fs.retries = int(retries)
    if scheme == "s3":
        _connect(fs, url)
    return fs, root


def _library_errors() -> tuple[type[BaseException], ...]:
    """The exception bases of the storage client libraries installed here."""
    import asyncio  # its TimeoutError, not TimeoutError before Python 3.11; asyncio takes ~30 ms to load

    errors: list[type[BaseException]] = [OSError, TimeoutError, asyncio.TimeoutError]
    for module, names in (("botocore.exceptions", ("BotoCoreError", "ClientError")),
                          ("aiohttp", ("ClientError",)),
                          ("azure.core.exceptions", ("AzureError",)),
                          ("google.auth.exceptions", ("GoogleAuthError",))):
        try:
            mod = __import__(module, fromlist=list(names))
        except ImportError:
            continue
        errors.extend(getattr(mod, n) for n in names)
    return tuple(errors)


_LIBRARY_ERRORS: tuple[type[BaseException], ...] | None = None


class ObjectStore:
    """Objects below one root of one filesystem (fsspec): ``s3://bucket/prefix``, a local dir.

    Costs are stated per method in requests to the store; nothing is cached here (callers
    cache). Safe to share between threads (fsspec's filesystems are).
    """

    def __init__(self, fs, root: str, scheme: str | None):
        """Use :meth:`from_url`. ``fs`` is an fsspec filesystem, ``root`` a path in it (no
        trailing ``/``), ``scheme`` the URL scheme shown in URLs (None for a local path)."""
        self.fs = fs
        self.root = root
        self.scheme = scheme
        self._opened_from: tuple[str, dict] | None = None  # from_url's arguments, for pickling

    def __reduce__(self):
        """Pickled as the :meth:`from_url` call that made it (Spark ships readers to its
        workers), so the copy opens its own client."""
        if self._opened_from is None:
            return super().__reduce__()
        return (ObjectStore.from_url, self._opened_from)

    @classmethod
    def from_url(cls, url, storage_options: dict | None = None) -> "ObjectStore":
        """The store rooted at ``url`` (``s3://bucket/prefix``, ``s3a://…`` (as ``s3://``),
        ``gs://``, ``az://``, ``abfss://``, ``file:///dir``, ``memory://``, or a local path).

        No request is made: the root need not exist yet (an S3 client is made now, so that
        options it does not take fail here). Raises
        :class:`~pylog.errors.MissingDependencyError` when the URL's filesystem package is
        not installed (``pip install 'pylog-kafka[s3]'``), and
        :class:`~pylog.errors.InvalidArgumentError` for an unknown scheme, a URL without a
        bucket, or options the filesystem does not take.
        """
        text = os.fspath(url)
        scheme, location, options = _parse(text, dict(storage_options or {}))
        fs, root = _open_filesystem(scheme, location, options)
        store = cls(fs, root, scheme)
        store._opened_from = (text, dict(storage_options or {}))
        return store

    def __repr__(self) -> str:
        return f"ObjectStore({self.url()!r})"

    # -- names -------------------------------------------------------------------------------
    def path(self, key: str) -> str:
        """The filesystem path of ``key`` (the root joined with it). No I/O."""
        if key.startswith("/") or "\x00" in key:
            raise InvalidArgumentError(f"object key {key!r} below {self.url()} must be relative "
                                       f"('/'-separated, no leading '/', no NUL byte)")
        return f"{self.root}/{key}" if key else self.root

    def url(self, key: str = "") -> str:
        """The URL of ``key`` (of the root when empty), never with credentials; a local path
        for a store opened on one. No I/O."""
        path = self.path(key)
        if self.scheme is None:
            return path
        return f"{self.scheme}://{path if self.scheme == 'file' else path.lstrip('/')}"

    # -- reads -------------------------------------------------------------------------------
    def read_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of object ``key``, fewer when the object ends first (none
        past its end). Cost: one ranged GET (none when ``end <= start``)."""
        if start < 0 or end < 0:
            raise InvalidArgumentError(f"byte range [{start}, {end}) of {self.url(key)} must not be negative")
        if end <= start:
            return b""
        try:
            return self.fs.cat_file(self.path(key), start=start, end=end)
        except PylogError:
            raise
        except _errors() as e:
            if _is_invalid_range(e):
                return b""
            raise self._error(f"reading bytes [{start}, {end}) of", key, e) from None

    def read(self, key: str) -> bytes:
        """The whole object ``key``. Cost: one GET (s3fs splits objects over 50 MiB into
        parallel ranged GETs after a HEAD)."""
        try:
            return self.fs.cat_file(self.path(key), start=0, end=None)
        except PylogError:
            raise
        except _errors() as e:
            raise self._error("reading", key, e) from None

    def size(self, key: str) -> int:
        """The size in bytes of object ``key``. Cost: one HEAD (a missing key on S3 also
        costs a listing, s3fs's check for a directory)."""
        info = self._info(key)
        if info is None:
            raise self._missing(key)
        return int(info["size"])

    def exists(self, key: str) -> bool:
        """Whether object ``key`` exists (a prefix holding objects is no object). Cost: as
        :meth:`size`."""
        return self._info(key) is not None

    def list(self, prefix: str = "") -> dict[str, int]:
        """Every object whose key starts with ``prefix`` (a string prefix, any depth), as
        ``{key: size}`` in key order. Cost: one LIST request per 1000 objects on S3 (when
        none is found, s3fs adds a HEAD and a LIST to tell a missing prefix from an
        object); never cached."""
        directory = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        base = self.path(directory)
        try:
            found = self.fs.find(base, detail=True, withdirs=False)
        except PylogError:
            raise
        except FileNotFoundError:
            return {}
        except _errors() as e:
            raise self._error("listing", prefix, e) from None
        root = self.root.rstrip("/") + "/" if self.root.rstrip("/") else ""
        out = {}
        for path, info in found.items():
            path = self.fs._strip_protocol(path)
            if info.get("type") != "file" or not path.startswith(root):
                continue
            key = path[len(root):]
            if key.startswith(prefix):
                out[key] = int(info["size"])
        return dict(sorted(out.items()))

    # -- writes ------------------------------------------------------------------------------
    def put(self, key: str, data: bytes) -> None:
        """Store ``data`` as object ``key``, replacing any. Cost: one PUT. Durability: an
        object store's PUT is atomic (readers see the old object or the whole new one); on a
        local filesystem the bytes are written in place and not fsynced."""
        try:
            self.fs.pipe_file(self.path(key), bytes(data))
        except PylogError:
            raise
        except _errors() as e:
            raise self._error("writing", key, e, reading=False) from None

    def put_file(self, key: str, local_path) -> None:
        """Copy the local file ``local_path`` to object ``key``. Cost: one PUT (a multipart
        upload over 50 MiB on S3). Durability: as :meth:`put`."""
        try:
            self.fs.put_file(os.fspath(local_path), self.path(key))
        except PylogError:
            raise
        except _errors() as e:
            raise self._error(f"uploading {local_path} to", key, e, reading=False) from None

    def delete(self, key: str) -> None:
        """Delete object ``key``; deleting a missing object is no error (as S3's DELETE).
        Cost: one DELETE."""
        try:
            self.fs.rm_file(self.path(key))
        except PylogError:
            raise
        except FileNotFoundError:
            return
        except _errors() as e:
            raise self._error("deleting", key, e, reading=False) from None

    # -- errors ------------------------------------------------------------------------------
    def _info(self, key: str) -> dict | None:
        try:
            info = self.fs.info(self.path(key))
        except PylogError:
            raise
        except FileNotFoundError:
            return None
        except _errors() as e:
            raise self._error("looking up", key, e) from None
        return info if info.get("type") == "file" else None

    def _missing(self, key: str) -> RemoteObjectNotFoundError:
        return RemoteObjectNotFoundError(f"object {key!r} not found", key=key, path=self.url(key))

    def _error(self, what: str, key: str, e: BaseException, *, reading: bool = True) -> PylogError:
        """The pylog error for the library's ``e`` on ``key``: a missing object when
        ``reading``, else a StorageError (a write's FileNotFoundError is a missing bucket)."""
        if reading and isinstance(e, FileNotFoundError):
            return self._missing(key)
        detail = redact(str(e)) or "no message"
        return StorageError(f"{what} {self.url(key)} failed: {type(e).__name__}: {detail}")


def _connect(fs, url: str) -> None:
    """Make s3fs's client now (no request), so that an option botocore does not take is an
    error of the open, not of the first read."""
    try:
        fs.connect()
    except TypeError as e:
        raise InvalidArgumentError(f"storage_options for {redact(url)} not accepted: {redact(str(e))}") from None
    except _errors() as e:
        raise StorageError(f"opening {redact(url)} failed: {type(e).__name__}: {redact(str(e))}") from None


def _errors() -> tuple[type[BaseException], ...]:
    global _LIBRARY_ERRORS
    if _LIBRARY_ERRORS is None:
        _LIBRARY_ERRORS = _library_errors()
    return _LIBRARY_ERRORS


def _is_invalid_range(e: BaseException | None) -> bool:
    """S3's 416 InvalidRange (a range starting past the object's end: a file read's EOF), in
    ``e`` or the botocore error it was translated from."""
    while e is not None:
        response = getattr(e, "response", None) or {}
        if (response.get("Error", {}).get("Code") == "InvalidRange"
                or response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 416):
            return True
        e = e.__cause__ or e.__context__
    return False
