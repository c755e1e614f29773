"""Kafka data in object storage: tiered segments read in place, and tiering pylog's own logs.

- :mod:`pylog.remote.store`: ``ObjectStore``, the one seam to object storage (fsspec).
"""

from pylog.remote import log_dir  # noqa: F401 - registers the opener that Log.open(url) calls (pylog.remote.location)
