"""Event patterns and the per-role attribute operators (docs/cep.md).

``POST /patterns`` registers a pattern with the caller's activated roles: a malformed
pattern or an unknown event type or attribute is 422 (with line and column), a pattern
reading more than the roles' operators release is 403 naming the attribute and the rule
(never a value). ``GET /patterns``, ``GET /patterns/{name}`` (explain), ``POST
/patterns/{name}/status``, ``DELETE /patterns/{name}`` and ``GET /patterns/{name}/rows``
(the subscriber's read, checked against her own rights each time) follow the query life
cycle; ``GET /patterns/{name}/subscribe`` streams the rows as server-sent events.
``GET``/``PUT /cep/rules`` read and replace the operators (PUT: CHANGE SYSTEM).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field
from sse_starlette import EventSourceResponse

from streamshield.server.auth import Auth
from streamshield.server.models import Removed
from streamshield.server.openapi import AUTHED, SSE_RESPONSE, errors
from streamshield.server.sse_rows import ResumeAfter, RowStreams, last_event_id

if TYPE_CHECKING:
    from streamshield.catalog.security import Session
    from streamshield.server.event_patterns import Registered


class PatternBody(BaseModel):
    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z][A-Za-z0-9_]*$")
    pattern: str = Field(min_length=1, max_length=10_000)
    key: str | None = Field(
        default=None,
        min_length=1,
        max_length=100,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="Partition key: an attribute every event of a match shares (like "
        "Flink's keyBy); it leads every output row and needs xi on every event type",
    )


class StatusBody(BaseModel):
    running: bool


class _Open(BaseModel):
    """A named object in the document whose keys docs/cep.md describes (the engine's
    views of rules and patterns grow with the pattern language)."""

    model_config = ConfigDict(extra="allow")


class CepRules(_Open):
    """The operators per role, event type and attribute."""


class PatternInfo(_Open):
    """A pattern: its name, status and the operators each variable is read under."""


class PatternList(BaseModel):
    patterns: list[dict[str, Any]]


class BatchGap(BaseModel):
    first: int
    last: int


class PatternRows(BaseModel):
    """The rows of the stored batches after a batch id that the caller may have now."""

    name: str
    status: str
    rows: list[dict[str, Any]] = Field(
        description="Each row with its batch id (``batch``), checked against your roles, "
        "rights and level"
    )
    last: int = Field(description="The newest batch id read: pass it as ``after`` next time")
    gap: BatchGap | None = Field(
        None,
        description="Batches after ``after`` no longer stored (pruned): their rows are gone. "
        "Ids may skip without a gap; only this says rows are missing",
    )


class PatternApi(Protocol):
    """What the pattern routes ask of the server
    (:class:`~streamshield.server.event_patterns.PatternService`)."""

    def rules(self, session: Session) -> dict: ...

    def set_rules(self, session: Session, document: Any) -> dict: ...

    def register(self, session: Session, name: str, text: str, key: str | None = None) -> dict: ...

    def list(self, session: Session) -> list[dict]: ...

    def explain(self, session: Session, name: str) -> dict: ...

    def set_status(self, session: Session, name: str, running: bool) -> dict: ...

    def remove(self, session: Session, name: str) -> None: ...

    def rows(self, session: Session, token: str, name: str, after: int) -> dict: ...

    def subscribable(self, session: Session, name: str) -> Registered: ...

    def may_still_receive(self, token: str, name: str) -> bool: ...


def router(patterns: PatternApi, streams: RowStreams) -> APIRouter:
    """The pattern routes of one server; ``streams`` serves the subscriptions."""
    api = APIRouter(tags=["patterns"])

    @api.get("/cep/rules", response_model=CepRules, responses=errors(*AUTHED))
    def rules(who: Auth) -> dict:
        """The operators: all of them (administrators) or your roles' per attribute."""
        return patterns.rules(who.session)

    @api.put("/cep/rules", response_model=CepRules, responses=errors(*AUTHED, 403, 422))
    def set_rules(body: dict[str, Any], who: Auth) -> dict:
        """Replace the operators (CHANGE SYSTEM); running patterns apply them from their
        next micro-batch, and one that became illegal stops with the reason."""
        return patterns.set_rules(who.session, body)

    @api.post(
        "/patterns",
        status_code=201,
        response_model=PatternInfo,
        responses=errors(*AUTHED, 403, 409, 422),
    )
    def register(body: PatternBody, who: Auth) -> dict:
        """Register and start a pattern with your activated roles."""
        return patterns.register(who.session, body.name, body.pattern, body.key)

    @api.get("/patterns", response_model=PatternList, responses=errors(*AUTHED))
    def listed(who: Auth) -> dict:
        return {"patterns": patterns.list(who.session)}

    @api.get("/patterns/{name}", response_model=PatternInfo, responses=errors(*AUTHED, 404, 422))
    def explain(name: str, who: Auth) -> dict:
        """Status, and the operators each variable's event type is read under."""
        return patterns.explain(who.session, name)

    @api.post(
        "/patterns/{name}/status",
        response_model=PatternInfo,
        responses=errors(*AUTHED, 403, 404, 422),
    )
    def status(name: str, body: StatusBody, who: Auth) -> dict:
        return patterns.set_status(who.session, name, body.running)

    @api.delete(
        "/patterns/{name}", response_model=Removed, responses=errors(*AUTHED, 403, 404, 422)
    )
    def remove(name: str, who: Auth) -> dict:
        patterns.remove(who.session, name)
        return {"removed": name}

    @api.get(
        "/patterns/{name}/rows",
        response_model=PatternRows,
        responses=errors(*AUTHED, 403, 404, 422),
    )
    def rows(
        name: str,
        who: Auth,
        after: int = Query(-1, ge=-1, description="The last batch id read (-1: from the first)"),
    ) -> dict:
        """Rows of the batches after batch ``after`` (SUBSCRIBE on the output, and your
        own operators must allow the pattern; each row is checked against your roles,
        rights and level)."""
        return patterns.rows(who.session, who.token, name, after)

    @api.get(
        "/patterns/{name}/subscribe",
        response_class=EventSourceResponse,
        responses={**SSE_RESPONSE, **errors(*AUTHED, 403, 404, 409, 422)},
    )
    async def subscribe(
        name: str,
        who: Auth,
        request: Request,
        after: ResumeAfter = None,
    ) -> EventSourceResponse:
        """The pattern's rows as server-sent events, as a query's subscription: ``rows``
        (``{"batch", "rows"}``, the SSE id is the batch id), ``gap``, ``replayed``,
        ``closed``/``error`` (the pattern stopped, failed or the right is gone)."""
        if after is None:
            after = last_event_id(request)
        registered = patterns.subscribable(who.session, name)
        return streams.serve(
            registered,
            str(who.session.user),
            who.token,
            after,
            lambda token: patterns.may_still_receive(token, name),
        )

    return api
