"""Where a log is: an object-store URL (``s3://``, ``gs://``, ``az://``, ``abfss://``; a
``file://`` URL of a tiered layout) or a local path, told apart without opening anything
or loading the object-store code.

``Log.open`` and ``LogManager`` ask here; this module imports nothing of pylog.log, so the
partition log and the remote log (which reads with pylog.log's parts) import one way.
"""

from __future__ import annotations

import os
import re

from pylog.errors import ReadOnlyError
from pylog.layout import LOG_SUFFIX
from pylog.remote.store import is_url, redact

_UUID = r"[A-Za-z0-9_-]{22}"
AIVEN_PARTITION = re.compile(rf"(?P<root>.*/)?(?P<topic>[^/]+)-{_UUID}/(?P<partition>\d+)")
LOCAL_TIERED_PARTITION = re.compile(rf"(?P<root>.*/)?(?P<topic>[^/]+)-(?P<partition>\d+)-{_UUID}")
LOG_DIR_PARTITION = re.compile(r"(?P<root>.*/)?(?P<topic>[^/]+)-(?P<partition>\d+)")

def remote_target(path) -> str | None:
    """The URL to open in object storage for ``path`` (any scheme but ``file://``, or a
    ``file://`` URL of a tiered layout), None for a local path or a ``file://`` URL of a
    plain log dir or partition dir (opened as local files, :func:`local_path`). No I/O but a
    directory listing for ``file://``."""
    if not isinstance(path, str) or not is_url(path):
        return None
    if not path.lower().startswith("file://"):
        return path
    local = local_path(path)
    tiered = AIVEN_PARTITION.fullmatch(local) or LOCAL_TIERED_PARTITION.fullmatch(local.rstrip("/"))
    if tiered or not _holds_log_dir(local):
        return path
    return None


def local_path(url: str) -> str:
    """The local path of a ``file://`` URL (the URL itself otherwise)."""
    return url[len("file://"):] if url.lower().startswith("file://") else url


def _holds_log_dir(directory: str) -> bool:
    """Whether ``directory`` is a plain partition dir or log dir (segments in it or one level down)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return True  # let the local open say what is wrong
    if not names or any(n.endswith(LOG_SUFFIX) and n[:-len(LOG_SUFFIX)].isdigit() for n in names):
        return True
    return any(LOG_DIR_PARTITION.fullmatch(n) and not LOCAL_TIERED_PARTITION.fullmatch(n)
               and os.path.isdir(os.path.join(directory, n)) for n in names)


def check_read_only(read_only: bool, url) -> None:
    """:class:`ReadOnlyError` unless ``read_only``: pylog only reads a log in object storage."""
    if not read_only:
        raise ReadOnlyError(f"{redact(str(url))} is in object storage: open it with read_only=True "
                            f"(pylog reads Kafka data in object storage; it writes there by tiering)")
