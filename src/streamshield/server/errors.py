"""One mapping from domain exceptions to an HTTP status and a message safe to show.

Every denial leaves the server through :func:`to_response`, so the rule "a message
reveals nothing the caller may not see" is enforced in one place: known exceptions
carry messages written to be shown (they name rules, fields and positions, never
data values); anything else becomes a bare 500 whose details go to the audit log.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from streamshield.catalog.store import StreamExists, UnknownStreamError
from streamshield.engine.queries.streaming_queries import QueryFailed
from streamshield.engine.spark_errors.analysis_errors import is_spark_refusal, spark_error_class
from streamshield.lang.cql import CqlError
from streamshield.lang.query_check import QueryRejected
from streamshield.lang.wire import WireFormatError
from streamshield.server import error_codes as codes

audit = logging.getLogger("streamshield.audit")


class ApiError(Exception):
    """A request the server refuses; ``message`` is shown to the caller as is. Each
    subclass names its status and default code (:mod:`.error_codes`); ``code`` gives a
    more precise one."""

    status, code = 422, codes.INVALID

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class Unauthorized(ApiError):
    status, code = 401, codes.UNAUTHORIZED


class Forbidden(ApiError):
    status, code = 403, codes.FORBIDDEN


class NotFound(ApiError):
    """Also what a caller gets for an object it may not view: existence is not revealed."""

    status, code = 404, codes.NOT_FOUND


def unseen(kind: str) -> NotFound:
    """The answer for an object that does not exist or that the caller may not see: the
    same words for both, naming the permission that makes an existing one visible."""
    return NotFound(f"no such {kind}, or you lack VIEW OBJECT on it")


class Conflict(ApiError):
    status, code = 409, codes.CONFLICT


class Invalid(ApiError):
    status, code = 422, codes.INVALID


class Unavailable(ApiError):
    """A part the request needs is not there now (a level's own Spark application)."""

    status, code = 503, codes.UNAVAILABLE


@dataclass(frozen=True)
class ErrorResponse:
    status: int
    code: str
    message: str
    retry_after: int | None = None

    def body(self) -> dict[str, str]:
        return {"error": self.code, "message": self.message}


def _security_errors() -> dict[str, tuple[int, str]]:
    """Status and code of the security catalog's exceptions, by class name.

    Matched by name so that this module imports without the catalog (and tolerates its
    subclasses); the message of these exceptions is written by the catalog to be shown.
    """
    return {
        "NotFound": (404, codes.NOT_FOUND),
        "AlreadyExists": (409, codes.EXISTS),
        "AuthError": (401, codes.UNAUTHORIZED),
        "Throttled": (429, codes.THROTTLED),
        "PermissionDenied": (403, codes.FORBIDDEN),
        "QuotaExceeded": (409, codes.QUOTA_EXCEEDED),
        "LimitExceeded": (422, codes.LIMIT_EXCEEDED),
        "LandingUnavailable": (503, codes.STORAGE_UNAVAILABLE),
    }


_BY_NAME = _security_errors()


def to_response(err: BaseException) -> ErrorResponse:
    """The response for any exception a request handler let escape."""
    response = _known(err)
    if response is not None:
        return response
    audit.error("internal error: %r", err, exc_info=err)
    return ErrorResponse(500, codes.INTERNAL, "internal error (details are in the audit log)")


def error_code(err: BaseException) -> str:
    """The ``error`` code :func:`to_response` answers ``err`` with, logging nothing (the
    handler that lets ``err`` escape logs it, once)."""
    response = _known(err)
    return codes.INTERNAL if response is None else response.code


def _known(err: BaseException) -> ErrorResponse | None:
    """The response for an exception whose message may be shown; None for the others."""
    if isinstance(err, ApiError):
        retry = getattr(err, "retry_after", None)
        return ErrorResponse(err.status, err.code, err.message, int(retry) if retry else None)
    for klass in type(err).__mro__:
        if klass.__name__ in _BY_NAME:
            status, code = _BY_NAME[klass.__name__]
            retry = getattr(err, "retry_after", None)
            return ErrorResponse(status, code, _message(err), int(retry) + 1 if retry else None)
    if isinstance(err, QueryRejected):
        return ErrorResponse(422, codes.query_rejected(err.rule), err.message)
    if isinstance(err, QueryFailed):
        return ErrorResponse(422, codes.QUERY_FAILED, str(err))
    if isinstance(err, WireFormatError | CqlError):
        return ErrorResponse(422, codes.INVALID, str(err))
    if is_spark_refusal(err):  # a plan refused past the planning steps: class only
        error_class = spark_error_class(err) or "ANALYSIS"
        audit.info("Spark refused a request: %s", str(err).split("\n", 1)[0][:2000])
        return ErrorResponse(
            422,
            codes.query_rejected(error_class.split(".")[0].lower()),
            f"Spark refused the query [{error_class}]",
        )
    if isinstance(err, StreamExists):
        return ErrorResponse(409, codes.EXISTS, "an object of that name exists")
    if isinstance(err, UnknownStreamError):
        return ErrorResponse(404, codes.NOT_FOUND, "no such object")
    return None


def _message(err: BaseException) -> str:
    text = str(err)
    return text if text else type(err).__name__
