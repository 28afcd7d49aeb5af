"""Every ``error`` code the API answers, with its HTTP status and what it means.

A client branches on the code of an error body (``{"error": <code>, "message": ...}``),
never on the message, whose wording may change: the codes are a contract. Each is
defined here once; the code that refuses a request names it from here (an exception
class's ``code``, :class:`~.errors.ApiError`'s ``code`` argument, a body written by
hand), and docs/api.md's table of codes is checked against :data:`REGISTRY`
(tests/unit/test_error_codes.py, which also fails on a code written in place).

Two codes are families, a prefix and a name: ``query_rejected.<rule>`` (the rule of the
SQL gate, the query shape or the CQL layer that refused a query, or Spark's error class
in lower case) and ``invalid_level.<kind>`` (the lattice's reason for refusing a level).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ErrorCode:
    code: str
    """The ``error`` value; a family's ends with ``.`` and a name follows it."""
    statuses: tuple[int, ...]
    """The HTTP statuses it comes with (none: the framework's own, whatever it is)."""
    meaning: str

    @property
    def family(self) -> bool:
        return self.code.endswith(".")


REGISTRY: dict[str, ErrorCode] = {}
"""Every code, by its ``error`` value (a family by its prefix, dot included)."""


def _code(code: str, statuses: int | tuple[int, ...], meaning: str) -> str:
    if code in REGISTRY:
        raise ValueError(f"error code {code!r} is registered twice")
    REGISTRY[code] = ErrorCode(
        code, (statuses,) if isinstance(statuses, int) else statuses, meaning
    )
    return code


def entry(code: str) -> ErrorCode | None:
    """The registry's entry for a code as answered (a family member: its family's)."""
    if code in REGISTRY:
        return REGISTRY[code]
    prefix, dot, name = code.partition(".")
    family = REGISTRY.get(prefix + dot) if dot and name else None
    return family if family is not None and family.family else None


# -- 401, 403, 404, 405 ----------------------------------------------------------------------

UNAUTHORIZED = _code(
    "unauthorized",
    401,
    "no, expired, logged-out or forged bearer token; a failed login (one message for "
    "every cause); a login asking for roles the user does not hold; an OpenID Connect "
    "token refused (the message names the rule: token refused: token expired, wrong "
    "audience, unknown signing key...)",
)
FORBIDDEN = _code(
    "forbidden",
    403,
    "the object is visible but the caller lacks the permission the message names (or "
    "gave a wrong current password)",
)
ABOVE_CLEARANCE = _code(
    "above_clearance",
    403,
    "the level asked for is above the user's clearance",
)
NOT_FOUND = _code(
    "not_found",
    404,
    "no such object, or one the caller may not see (indistinguishable); no such path",
)
METHOD_NOT_ALLOWED = _code(
    "method_not_allowed",
    405,
    "the path exists, the method does not",
)

# -- 409 -----------------------------------------------------------------------------------

CONFLICT = _code(
    "conflict",
    409,
    "the request conflicts with the state of things, which the message names (a role "
    "capacity reached, an administrator disabling herself, ...)",
)
EXISTS = _code(
    "exists",
    409,
    "the name is taken (names are global: said even of objects the caller may not see)",
)
QUOTA_EXCEEDED = _code(
    "quota_exceeded",
    409,
    "a quota of the caller's (running queries, state rows) is reached",
)
REMOVED = _code(
    "removed",
    409,
    "the query was removed while it started",
)
QUERY_NOT_RUNNING = _code(
    "query_not_running",
    409,
    "a subscription to a query that is stopped or failed: it produces nothing",
)
QUERY_FAILED = _code(
    "query_failed",
    (409, 422),
    "409: a started query failed again at once (its error class is named); 422: the "
    "query failed while the engine ran it for the request",
)
LEVEL_APPLICATIONS = _code(
    "level_applications",
    409,
    "a pattern at a level while each level's work runs in its own Spark application, "
    "which patterns cannot do",
)
PATTERN_NOT_RUNNING = _code(
    "pattern_not_running",
    409,
    "a read of or a subscription to a pattern that is not running",
)
INGEST_HALTED = _code(
    "ingest_halted",
    409,
    "secure ingest is halted (its shield state is missing, unreadable or out of step): "
    "no element or INSERT SP is accepted until an administrator repairs it",
)

# -- 413, 422, 429 ---------------------------------------------------------------------------

TOO_LARGE = _code(
    "too_large",
    413,
    "the request body is over its limit (64 KiB; 4 MiB for elements), which is named",
)
INVALID = _code(
    "invalid",
    422,
    "an invalid request: body validation (with `problems` by field), a body that is "
    "not UTF-8 JSON, an unknown query parameter, a bad parameter or wire-format line",
)
OUTPUT = _code(
    "output",
    422,
    "a query with ON RESULT named an output other than the stream its sps go to",
)
SP = _code(
    "sp",
    422,
    "a query-scoped sp (POST /networks/sps) that is not well formed",
)
SETTINGS_INVALID = _code(
    "settings_invalid",
    422,
    "a settings change with an unknown key or a wrong type: nothing was stored",
)
LIMITS_UNREADABLE = _code(
    "limits_unreadable",
    422,
    "the stored operator limits setting cannot be read: an administrator must fix it",
)
LIMIT_EXCEEDED = _code(
    "limit_exceeded",
    422,
    "the query goes beyond an operator limit of the caller's roles",
)
QUERY_REJECTED = _code(
    "query_rejected.",
    422,
    "a refused query; the name after the dot is the rule (`parse_error`, "
    "`unknown_stream`, `not_supported`, ...) or Spark's error class",
)
INVALID_LEVEL = _code(
    "invalid_level.",
    422,
    "a level, COI or CI class the lattice refuses; the name after the dot says why",
)
THROTTLED = _code(
    "throttled",
    429,
    "too many failed logins for this user name or client; retry after Retry-After",
)

# -- 500, 503, and the framework's own -------------------------------------------------------

INTERNAL = _code(
    "internal",
    500,
    "an unexpected failure; its details are in the audit log, never in the answer",
)
UNAVAILABLE = _code(
    "unavailable",
    503,
    "a part the request needs is not there now (a level's own Spark application)",
)
STORAGE_UNAVAILABLE = _code(
    "storage_unavailable",
    503,
    "the storage cannot be written (read-only, full, gone): nothing was accepted",
)
INGEST_BACKLOG = _code(
    "ingest_backlog",
    503,
    "secure ingest is too far behind: nothing of the append landed; send it again "
    "after Retry-After",
)
LOGIN_BUSY = _code(
    "login_busy",
    503,
    "too many logins are being checked: nothing was checked or counted; retry after Retry-After",
)
SERVER_STOPPING = _code(
    "server_stopping",
    503,
    "the request was still running when the server stopped, past its grace; retry "
    "after Retry-After",
)
HTTP_ERROR = _code(
    "http_error",
    (),
    "a refusal of the web framework's own other than the above, with its status",
)


def query_rejected(rule: str) -> str:
    """The code of a query refused by ``rule``."""
    return QUERY_REJECTED + rule


def invalid_level(kind: str) -> str:
    """The code of a level the lattice refused for ``kind``."""
    return INVALID_LEVEL + kind
