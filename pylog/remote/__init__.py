"""Kafka data in object storage: tiered segments read in place, and tiering pylog's own logs.

- :mod:`pylog.remote.store`: ``ObjectStore``, the one seam to object storage (fsspec).
"""
