"""A query admitted once: parsed, checked, shaped and given its roles on the way in.

A query's text is parsed and checked once, not again at every layer it passes (the API,
the query interface, the query service): each layer could read it differently, and
none could say which reading Spark got. Admission does it once and hands on one value;
every later step (limits, routing, the security rewrites of :mod:`rewrite_rules`, the
operator tree of query sharing) starts from that value's checked tree.

Pure Python: no pyspark (tests/unit/test_purity.py).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from streamshield.lang.continuous import (
    ContinuousQuery,
    Shape,
    SpInsert,
    parse_request,
    plan_shape,
)
from streamshield.lang.output_level import OutputLevel, output_level
from streamshield.lang.query_check import CheckedQuery, QueryRejected, check_query
from streamshield.policy.query_level import QueryLevel
from streamshield.policy.roles import RoleHierarchy, UnknownRoleError


@dataclass(frozen=True)
class AdmittedQuery:
    """Everything known about a continuous query before anything runs."""

    text: str
    """As the user wrote it (stored, audited, shown back)."""
    request: ContinuousQuery
    """Its CQL parts: windows and ON RESULT sps taken out of the SQL."""
    checked: CheckedQuery
    """The SQL, checked against the streams its author may read; its tree is the input
    of every rewrite."""
    shape: Shape
    """The engine path it takes and what operator limits count."""
    roles: tuple[str, ...]
    """The roles it runs with (activated, sorted)."""
    effective: frozenset[str]
    """Those roles and every junior: what its secured views admit."""
    level: QueryLevel | None = None
    """The Chinese-Wall level it runs at (its session's when admitted); None while
    levels are off (no COI class): then no level conjunct is added anywhere."""

    @property
    def streams(self) -> tuple[str, ...]:
        return self.checked.streams

    @property
    def output_level(self) -> OutputLevel:
        """Where its output rows are labelled: at its level, or (a stateless selection)
        at each row's own tuple's (``lang.output_level``)."""
        return output_level(self.shape, self.checked.tree)

    @property
    def delegating(self) -> bool:
        """ON RESULT: it reads grant views and writes a derived stream with its own sps."""
        return bool(self.request.on_result)


def admit(
    text: str,
    roles: Iterable[str],
    hierarchy: RoleHierarchy,
    streams: Collection[str],
    level: QueryLevel | None = None,
) -> AdmittedQuery | SpInsert:
    """The admitted query (or the sp script) of ``text``, or :class:`QueryRejected`.

    ``streams``: those its author may read (an unknown and an invisible stream look the
    same). Roles are checked before the text, so an unknown role is the answer even to
    a query that would also fail otherwise.
    """
    request = parse_request(text)
    if isinstance(request, SpInsert):
        return request
    activated = tuple(sorted(set(roles)))
    if not activated:
        raise QueryRejected("no_role", "a query needs at least one role")
    try:
        effective = hierarchy.effective(activated)
    except UnknownRoleError as err:
        raise QueryRejected("unknown_role", str(err)) from None
    checked = check_query(request.sql, streams)
    shape = plan_shape(request, checked.tree)
    return AdmittedQuery(text, request, checked, shape, activated, effective, level)
