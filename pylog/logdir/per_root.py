"""``PerRoot``: a base for what a process keeps once per log dir and shares among its
clients (the writer pool, the group coordinator), counted so the last user closes it."""

from __future__ import annotations

import os
import threading


class PerRoot:
    """Subclasses get ``for_root(root)`` (the shared instance, one more user) and
    ``release()`` (one user fewer; the last calls ``_close()``)."""

    _shared: dict
    _shared_lock = threading.RLock()  # a constructor may take another PerRoot

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._shared = {}

    @classmethod
    def for_root(cls, root):
        """This process's instance for ``root``; give it back with :meth:`release`."""
        key = os.path.realpath(root)
        with cls._shared_lock:
            instance = cls._shared.get(key)
            if instance is None:
                instance = cls._shared[key] = cls(key)
            instance._users = getattr(instance, "_users", 0) + 1
            return instance

    def release(self) -> None:
        """One user is done; the last one closes the instance."""
        with self._shared_lock:
            self._users = getattr(self, "_users", 1) - 1
            if self._users > 0:
                return
            key = os.path.realpath(self.root)
            if self._shared.get(key) is self:
                del self._shared[key]
        self._close()

    def _close(self) -> None:
        raise NotImplementedError
