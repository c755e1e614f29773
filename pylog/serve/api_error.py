"""``ApiError``: an error code and its message, as Kafka's ``ApiError`` carries them in the
admin APIs' answers (each topic or resource has its own). A pylog error becomes one through
:func:`~pylog.serve.error_codes.error_code`; a rule only the protocol has (a replication
factor, a broker id) raises one directly."""

from __future__ import annotations

from collections import Counter

from pylog.errors import PylogError
from pylog.serve.error_codes import NONE, UNKNOWN_SERVER_ERROR, error_code


class ApiError(Exception):
    """Kafka's error ``code`` with ``message``, for one topic or resource of a request."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code

    @classmethod
    def of(cls, exc: BaseException) -> "ApiError":
        """``exc`` as an ApiError: itself, or a pylog error's code with its message.

        >>> from pylog.errors import InvalidConfigError
        >>> e = ApiError.of(InvalidConfigError("segment.bytes=1: too small"))
        >>> e.code, str(e)
        (40, 'segment.bytes=1: too small')
        """
        return exc if isinstance(exc, ApiError) else cls(error_code(exc), str(exc))


def named_twice(names) -> set:
    """The names given more than once in one request: Kafka answers each of them
    ``INVALID_REQUEST`` and does nothing for them (topics in CreateTopics and
    CreatePartitions, config keys of a resource in IncrementalAlterConfigs). O(names).

    >>> sorted(named_twice(["a", "b", "a"]))
    ['a']
    """
    return {name for name, count in Counter(names).items() if count > 1}


def attempt(apis, what: str, action, *args) -> tuple:
    """``(action(*args), None)``, or ``(None, error)`` with the :class:`ApiError` its failure
    answers: a pylog error's code and message, or for anything else (a bug: logged, with its
    traceback, as ``what`` failing) ``UNKNOWN_SERVER_ERROR``: the client hears it and the
    server lives on."""
    try:
        return action(*args), None
    except (PylogError, ApiError) as e:
        return None, ApiError.of(e)
    except Exception as e:
        apis.log_failure(what, e)
        return None, ApiError(UNKNOWN_SERVER_ERROR, "unexpected server error")


def code_and_message(error: ApiError | None) -> tuple[int, str | None]:
    """The error code and message an answer carries for ``error`` (None: ``NONE``, no message)."""
    return (NONE, None) if error is None else (error.code, str(error))
