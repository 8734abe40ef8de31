"""The exceptions somna raises. Each carries the engine's message as its text.

Every class derives from :class:`somna.Error`; those for rejected input are also
:class:`ValueError`, so ``except ValueError`` keeps working for callers that expect it. A call
on something closed raises :class:`ClosedError`, a :class:`RuntimeError`.
"""

from __future__ import annotations


class Error(Exception):
    """Base class of every somna error."""


class BusyError(Error, TimeoutError):
    """Another writer (thread or process) held the store longer than ``busy_timeout``.

    Nothing was written; try again. ``waited`` is how long the call waited, in seconds.
    """

    waited: float = 0.0


class ClosedError(Error, RuntimeError):
    """The store, session or history was closed: every call after ``close()`` raises this
    (closing again does not). It is a ``RuntimeError``, as a closed session of the OpenAI
    Agents SDK raises; not an ``InvalidError``, since the input was not at fault."""


class ConflictError(Error):
    """A write would contradict what is stored: an idempotency key reused with other content,
    or an ``expected_revision`` that is no longer current. Nothing was written."""


class CorruptError(Error):
    """A stored value failed its checksum or could not be decoded, or a file is not what it
    should be. Nothing is silently dropped: run ``somna verify``."""


class InvalidError(Error, ValueError):
    """The input was rejected (bad text, id, block, setting, ...); nothing was written."""


class NotSerializableError(InvalidError, TypeError):
    """A session item could not be encoded as JSON; nothing was written."""


class WrongBlockError(InvalidError):
    """``nap`` answered a block that is not the next pending one; ``next_block`` names it."""

    next_block: str | None = None


class OutOfRangeError(InvalidError, IndexError):
    """A block or memory id lies past the end of the log."""


class NotFoundError(Error, FileNotFoundError):
    """There is no store at the path (only with ``Store(path, create=False)``)."""


class DeniedError(Error, PermissionError):
    """The handle's principal may not do this."""


class UnsupportedError(Error):
    """The file was written by a newer somna, or is a redb file but not a somna store."""


class InternalError(Error):
    """somna failed internally (a panic in the engine, caught). Nothing unacknowledged was
    written; the file may be damaged: run ``somna verify``."""


class StorageError(Error, OSError):
    """The storage engine or the operating system failed."""


__all__ = [
    "BusyError",
    "ClosedError",
    "ConflictError",
    "CorruptError",
    "DeniedError",
    "Error",
    "InternalError",
    "InvalidError",
    "NotFoundError",
    "NotSerializableError",
    "OutOfRangeError",
    "StorageError",
    "UnsupportedError",
    "WrongBlockError",
]
