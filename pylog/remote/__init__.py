"""Kafka data in object storage: tiered segments read in place, and tiering pylog's own logs.

- :mod:`pylog.remote.store`: ``ObjectStore``, the one seam to object storage (fsspec).

Nothing of it but :mod:`pylog.remote.location` and :mod:`pylog.remote.store` loads with a
local log: ``Log.open`` and ``LogManager`` import the rest when given a URL or a
``remote_storage``.
"""
