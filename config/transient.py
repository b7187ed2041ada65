"""Transient database errors, and retrying the work they interrupt.

A deadlock, a serialization failure or a lost connection says nothing about the work itself: the same
statements, run again a moment later, usually succeed. `transient_retry` runs a unit of work (one whole
transaction: it must not be called inside `transaction.atomic`) again after such an error, with
exponential backoff and jitter, a bounded number of times; any other error goes up at once (and inside a
caller's `transaction.atomic`, which the error has aborted, the work runs once). A lost
connection is closed first, so the next attempt opens a new one (Django does not reconnect a connection
that failed in the middle of a request or a loop).

`transient_reason` names the error in words an operator can act on, and `transient_gave_up` says what
to do about it, for the message of a job that failed after its retries (`transient_attempts` says how
many there were).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

import psycopg
from django.db import DEFAULT_DB_ALIAS, DatabaseError, InterfaceError, OperationalError, connections
from tenacity import RetryCallState, Retrying, retry_if_exception, wait_random_exponential

logger = logging.getLogger(__name__)

T = TypeVar("T")

ATTEMPTS = 6
BACKOFF_FIRST_SECONDS = 0.2
BACKOFF_MAX_SECONDS = 10.0

# SQLSTATEs that end a transaction for reasons outside it: run again, it is likely to pass.
_RETRY_SQLSTATES = {
    "40001": "a serialization failure (another transaction changed the same rows)",
    "40P01": "a deadlock with another transaction",
    "55P03": "a lock not available in time",
    "57P01": "the database server shut the connection (administrator command)",
    "57P02": "the database server crashed",
    "57P03": "the database server is starting or stopping",
    "08000": "the connection to the database failed",
    "08003": "the connection to the database does not exist",
    "08006": "the connection to the database was lost",
    "08001": "the database server cannot be reached",
    "08004": "the database server refused the connection",
}


# What an operator can do once the retries are spent: contention passes when the other work ends; a
# lost connection needs the database server back.
_ADVICE_CONTENTION = (
    "other work kept taking the same rows or tables; run it again once the jobs and maintenance in progress have ended"
)
_ADVICE_CONNECTION = (
    "PostgreSQL could not be reached; check that it is running and accepts connections (manage.py health), then run"
    " it again"
)


def _cause(exc: BaseException) -> BaseException:
    """The driver's error under Django's wrapper (Django raises its own class `from` psycopg's)."""
    return exc.__cause__ if isinstance(exc.__cause__, psycopg.Error) else exc


def transient_reason(exc: BaseException) -> str | None:
    """Why `exc` is worth another try, in an operator's words, or None when it is not transient."""
    if not isinstance(exc, DatabaseError | psycopg.Error):
        return None
    cause = _cause(exc)
    sqlstate = getattr(cause, "sqlstate", None)
    if sqlstate in _RETRY_SQLSTATES:
        return _RETRY_SQLSTATES[sqlstate]
    if sqlstate is None and isinstance(exc, OperationalError | InterfaceError | psycopg.OperationalError):
        # No SQLSTATE: the client lost the server (a closed socket, a refused or reset connection).
        return "the database connection was lost"
    return None


def connection_lost(exc: BaseException) -> bool:
    """The error left the connection unusable (rather than a statement failing on a live connection)."""
    sqlstate = getattr(_cause(exc), "sqlstate", None)
    return sqlstate is None or sqlstate.startswith(("08", "57"))


def transient_attempts(exc: BaseException) -> int:
    """How many times `transient_retry` ran the work that ended in `exc` (1 when it did not run it)."""
    return getattr(exc, "transient_attempts", 1)


def transient_gave_up(exc: BaseException) -> str:
    """One line for an operator about a transient error that outlasted its retries: how many attempts,
    what the error was and what to do."""
    attempts = transient_attempts(exc)
    reason = transient_reason(exc) or "a database error"
    advice = _ADVICE_CONNECTION if connection_lost(exc) else _ADVICE_CONTENTION
    return f"gave up after {attempts} attempt{'s' if attempts != 1 else ''}: {reason}; {advice}"


def transient_note(exc: BaseException, attempt: int, wait: float) -> str:
    """One line for a log that shows a retry: which attempt stopped, why, and when the next one starts."""
    return f"attempt {attempt} stopped by {transient_reason(exc) or 'a database error'}; trying again in {wait:.1f} s"


def connections_reset() -> None:
    """Close every database connection of this thread, so the next use opens a new one."""
    for connection in connections.all(initialized_only=True):
        try:
            connection.close()
        except DatabaseError:
            connection.connection = None  # closing a dead socket can fail; drop it all the same


def transient_retry(
    work: Callable[[], T],
    *,
    what: str,
    attempts: int = ATTEMPTS,
    first: float = BACKOFF_FIRST_SECONDS,
    longest: float = BACKOFF_MAX_SECONDS,
    lost_for: float | None = None,
    on_retry: Callable[[BaseException, int, float], None] | None = None,
) -> T:
    """`work()`, run again after a transient database error up to `attempts` times in all, waiting a
    random time below first·2ⁿ (at most `longest`) between tries; the last error goes up unchanged, with
    the number of attempts on it (`transient_attempts`).

    With `lost_for`, a lost connection is tried again for that many seconds from the first attempt
    rather than `attempts` times (a server restarting takes a while; the backoff keeps it from a hot
    loop). `on_retry(error, attempt, seconds)` is called before each wait, to show the retry where the
    work reports (a job's log). Inside a transaction (a caller's, or a test's) the work runs once: the
    error aborted that transaction, so no later attempt could run in it."""
    if connections[DEFAULT_DB_ALIAS].in_atomic_block:
        return work()
    tries = 0

    def counted() -> T:
        nonlocal tries
        tries += 1
        return work()

    def stop(state: RetryCallState) -> bool:
        exc = state.outcome.exception() if state.outcome else None
        since = state.seconds_since_start
        if lost_for is not None and exc is not None and connection_lost(exc) and since is not None:
            return since >= lost_for
        return state.attempt_number >= attempts

    def before_sleep(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        wait = state.next_action.sleep if state.next_action else 0.0
        if exc is not None and connection_lost(exc):
            connections_reset()
        logger.warning(
            "%s: %s (attempt %d); trying again in %.1f s",
            what, transient_reason(exc) if exc else "?", state.attempt_number, wait,
        )  # fmt: skip
        if on_retry is not None and exc is not None:
            on_retry(exc, state.attempt_number, wait)

    retrying = Retrying(
        retry=retry_if_exception(lambda exc: transient_reason(exc) is not None),
        stop=stop,
        wait=wait_random_exponential(multiplier=first, max=longest),
        before_sleep=before_sleep,
        reraise=True,
    )
    try:
        return retrying(counted)
    except Exception as exc:
        if transient_reason(exc) is not None:
            exc.transient_attempts = tries  # type: ignore[attr-defined]
        raise
