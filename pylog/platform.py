"""Which platforms pylog runs on: Linux and macOS (POSIX ``flock`` writer locks and
``os.sendfile`` zero-copy reads). Elsewhere the features that need them raise
:class:`~pylog.errors.UnsupportedPlatformError` at the point of use."""

from __future__ import annotations

import sys

from pylog.errors import UnsupportedPlatformError

#: ``sys.platform`` prefixes pylog supports
SUPPORTED_PLATFORMS = ("linux", "darwin")


def is_supported(platform: str | None = None) -> bool:
    """True on Linux and macOS (``platform`` defaults to ``sys.platform``)."""
    return (platform or sys.platform).startswith(SUPPORTED_PLATFORMS)


def require_posix(feature: str) -> None:
    """Raise :class:`UnsupportedPlatformError` naming ``feature`` unless the platform is
    supported. Costs one string comparison."""
    if not is_supported():
        raise UnsupportedPlatformError(
            f"{feature} needs Linux or macOS (POSIX); this platform is {sys.platform!r}")
