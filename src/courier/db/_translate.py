"""The one place where database failures become courier.errors exceptions.

Stored functions raise SQLSTATE ``CQnnn`` where nnn is the wire status code
(schema.sql lists them) and report the frequent read misses as a ``status`` result
column; both map through ``errors.for_status``. Anything else is classified by what
it means to a caller: bad data, a database out of reach, or an internal failure.
"""

from __future__ import annotations

import json

import asyncpg

from courier import errors

COURIER_SQLSTATE_CLASS = "CQ"

# Lost or refused connections, a server shutting down, no connection slots left, and
# a driver whose connection is out of step with its server: InternalClientError (e.g.
# "cannot switch to state ..." after a backend was terminated while idle, asyncpg
# issue #1069) and its ProtocolError. The pool replaces such a connection, so each
# means "try again", as Unavailable says.
_OUTAGES: tuple[type[BaseException], ...] = (
    OSError,
    TimeoutError,
    asyncpg.PostgresConnectionError,
    asyncpg.exceptions.OperatorInterventionError,
    asyncpg.exceptions.InsufficientResourcesError,
    asyncpg.exceptions.ConnectionDoesNotExistError,
    asyncpg.InternalClientError,
)

# The database aborted the call to let another go on: a deadlock it broke, or a
# conflict under serializable isolation. The call's transaction was rolled back whole,
# so running it again is safe.
_CONFLICTS: tuple[type[BaseException], ...] = (
    asyncpg.exceptions.DeadlockDetectedError,
    asyncpg.exceptions.SerializationError,
)


class ConflictAborted(errors.Unavailable):
    """UNAVAILABLE: the database aborted the call over a conflict with another; nothing
    of it was applied, and it may be tried again."""


# What the repository lets through to translate(); other exceptions are bugs.
TRANSLATED: tuple[type[BaseException], ...] = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    *_OUTAGES,
)


def sqlstate_for(status: errors.Status) -> str:
    """The SQLSTATE a stored function raises for a wire status."""
    return f"{COURIER_SQLSTATE_CLASS}{int(status):03d}"


def translate(exc: BaseException) -> errors.CourierError:
    """The Courier exception a database failure means; raise it ``from exc``."""
    if isinstance(exc, errors.CourierError):
        return exc
    sqlstate = getattr(exc, "sqlstate", None) or ""
    if sqlstate.startswith(COURIER_SQLSTATE_CLASS):
        return _from_courier_sqlstate(sqlstate, exc)
    if isinstance(exc, _OUTAGES) or _is_closed_connection(exc):
        return errors.Unavailable(f"the database is unavailable: {exc}")
    if isinstance(exc, _CONFLICTS):
        return ConflictAborted(
            f"the database aborted the call over a conflict with another ({exc}); nothing"
            " of it was applied: try again"
        )
    if sqlstate.startswith("22") or isinstance(exc, asyncpg.DataError):
        return errors.BadRequest(f"bad request: {exc}")  # data exceptions (e.g. a NUL byte)
    return errors.InternalError(f"database error: {exc}")


def is_outage(exc: BaseException) -> bool:
    """Whether a failure means the database is out of reach rather than a bug."""
    return isinstance(exc, (errors.Unavailable, *_OUTAGES)) or _is_closed_connection(exc)


def check_status(status: int, message: str | None = None) -> None:
    """Raise the exception for a non-OK ``status`` result column."""
    if status != errors.Status.OK:
        raise errors.for_status(status, message)


def _from_courier_sqlstate(sqlstate: str, exc: BaseException) -> errors.CourierError:
    message = getattr(exc, "message", None) or str(exc)
    try:
        status = errors.Status(int(sqlstate[len(COURIER_SQLSTATE_CLASS) :]))
    except ValueError:
        return errors.InternalError(f"unknown Courier SQLSTATE {sqlstate}: {message}")
    if status is errors.Status.PAYLOAD_TOO_LARGE:
        detail = json.loads(getattr(exc, "detail", None) or "{}")
        return errors.PayloadTooLarge(size=detail.get("size"), limit=detail.get("limit"))
    return errors.for_status(status, message)


def _is_closed_connection(exc: BaseException) -> bool:
    # A closed connection or a closing pool surfaces as a bare InterfaceError.
    text = str(exc)
    return type(exc) is asyncpg.InterfaceError and ("closed" in text or "closing" in text)
