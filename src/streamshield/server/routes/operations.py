"""Operating the server: queries with status and progress, health, readiness, metrics, audit.

Who sees what:

* ``/healthz`` and ``/readyz`` need no token (a load balancer or an orchestrator asks
  them); they say nothing about users, streams or queries.
* ``/queries`` lists only queries the caller may view (the catalog's VIEW OBJECT, as
  ``/catalog``); a query's text and plan (``/queries/{name}`` ``text`` and
  ``/explain``) may quote literals of its owner's data, so only the owner and
  administrators (CHANGE SYSTEM) get them.
* ``/metrics`` names every stream and query: administrators' tokens or the configured
  scrape token (``metrics_token``) only.
* ``/audit``: administrators read every entry, everyone else their own, without the
  ``admin_only`` part of a detail (the catalog strips it).
"""

from __future__ import annotations

import hmac
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal, Protocol

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel
from sqlalchemy import text

from streamshield.catalog.audit import AuditFilter, Event
from streamshield.lang.continuous import ContinuousQuery, ShapeKind, parse_request, plan_shape
from streamshield.lang.output_level import output_level
from streamshield.lang.query_check import check_query
from streamshield.lang.secured_plan import secured_plan
from streamshield.policy.query_level import QueryLevel
from streamshield.server import security_port as port
from streamshield.server.auth import Auth
from streamshield.server.errors import Forbidden, Invalid, NotFound, Unauthorized
from streamshield.server.metrics import progress_of, status_of
from streamshield.server.models import ErrorBody
from streamshield.server.queries import failure_class

if TYPE_CHECKING:
    from streamshield.catalog.security import Session
    from streamshield.engine.queries.cql_service import CqlService
    from streamshield.server.administration_service import AdministrationService
    from streamshield.server.connector_service import ConnectorService
    from streamshield.server.ingest_guard import IngestHalt
    from streamshield.server.metrics import ServerMetrics
    from streamshield.server.queries import QueryRegistry

Status = Literal["running", "stopped", "failed"]
ENGINES = {
    ShapeKind.STREAM: "spark-streaming",
    ShapeKind.SLIDING_AGGREGATE: "spark-streaming-window",
    ShapeKind.WINDOW_RELATION: "window-query",
    ShapeKind.JOIN: "scjoin",
}


class QueryInfo(BaseModel):
    name: str
    owner: str
    output: str | None
    inputs: list[str]
    status: Status
    error_class: str | None = None
    failed_at: str | None = None
    last_batch: int | None = None
    input_rows_per_second: float | None = None
    processed_rows_per_second: float | None = None
    batch_duration_ms: int | None = None
    subscribers: int = 0
    network: str | None = None
    """The stream whose shared network runs this query as one of its branches (a join:
    ``<left> JOIN <right>``), if it does: ``last_batch``, the rows/s and the batch
    duration are then the network's, shared by every branch; ``subscribers`` and the
    delivery lag are always this query's own."""
    delivery_lag_seconds: float | None = None
    """The largest time from a micro-batch reaching delivery to its rows being handed
    to a subscriber, over the last 10 s (None: no hand-over in that time)."""


class QueryDetail(QueryInfo):
    text: str | None = None
    """The query's text: its owner and administrators only (it may quote literals)."""


class QueryList(BaseModel):
    queries: list[QueryInfo]


class WindowInfo(BaseModel):
    item: str
    stream: str
    kind: str
    size: int
    slide: int | None


class QueryExplain(BaseModel):
    name: str
    kind: str
    engine: str
    aggregate: bool
    streams: list[str]
    windows: list[WindowInfo]
    operators: list[str]
    join_keys: list[str]
    time_windows: list[float | None]
    sql: str
    """The checked SQL as the engine's parser reads it (stream names, no secured views)."""
    level: str | None = None
    """The Chinese-Wall level the query runs at; None while levels are off."""
    security: list[str] = []
    """The conjuncts every secured view filters on, beneath every user expression."""
    labels: list[str] = []
    """How output rows are labelled and checked at delivery."""
    secured_sql: str | None = None
    """The SQL Spark parsed for the query, exactly as the security rewrites produced it:
    each stream read as its secured view ``ss_<id>_<stream>`` (filtering on
    ``security``), the labels carried on as columns ``_ss_*``. None while the query
    does not run in this process (stopped, failed, or in its level's own application)."""


class Health(BaseModel):
    status: Literal["ok"]


class Readiness(BaseModel):
    status: Literal["ready", "starting", "unavailable"]
    checks: dict[str, bool]
    detail: dict[str, str] = {}
    """Per connector (``kafka.<binding>``, ``mqtt.<binding>``): ``ok`` or why its records
    do not land now. A broker outage does not make the server unready: the other streams
    still work."""


class AuditObject(BaseModel):
    kind: str
    name: str


class AuditRecord(BaseModel):
    id: int
    at: str
    actor: str | None
    client: str | None
    action: str
    outcome: str
    object: AuditObject | None
    detail: dict[str, Any]


class AuditPage(BaseModel):
    entries: list[AuditRecord]
    next_before_id: int | None
    """Pass as ``before_id`` for the next (older) page; null on the last page."""


MAX_ID = 2**63 - 1
"""The largest id the catalog's databases store (a 64-bit signed integer): a larger
``before_id`` reached SQLite as an OverflowError, a 500 (found by the API fuzzer)."""

Responses = dict[int | str, dict[str, Any]]
NEEDS_TOKEN: Responses = {401: {"model": ErrorBody, "description": "no, expired or forged token"}}
NOT_VISIBLE: Responses = {
    404: {"model": ErrorBody, "description": "no such query (or not visible)"}
}
INVALID: Responses = {422: {"model": ErrorBody, "description": "a parameter is invalid (named)"}}


def iso(seconds: float | None) -> str | None:
    """Epoch seconds as an ISO-8601 UTC string."""
    if seconds is None:
        return None
    return datetime.fromtimestamp(float(seconds), UTC).isoformat().replace("+00:00", "Z")


class OperationsHost(Protocol):
    """What the operations routes read of the server: its catalog, queries, engine,
    metrics and the state of ingest (:class:`~streamshield.server.service.ServerService`)."""

    security: Any
    administration: AdministrationService
    queries: QueryRegistry
    cql: CqlService
    metrics: ServerMetrics
    halt: IngestHalt
    connectors: ConnectorService
    started: bool

    @property
    def ingest_query(self) -> Any: ...


def router(service: OperationsHost, metrics_token: str | None = None) -> APIRouter:
    """The operations routes of one server."""
    api = APIRouter(tags=["operations"])

    def admin(session: Session) -> bool:
        return port.check(service.security, session, "CHANGE SYSTEM", "system", "system")

    def record_of(session: Session, name: str) -> Any:
        for record in port.queries(service.security, session):
            if record.name == name:
                return record
        raise NotFound("no such query")

    def may_read_text(session: Session, record: Any) -> bool:
        return record.owner == port.user_of(session) or admin(session)

    @api.get("/queries", response_model=QueryList, responses=NEEDS_TOKEN)
    def list_queries(who: Auth) -> QueryList:
        """Queries the caller may view, with status and last progress."""
        records = port.queries(service.security, who.session)
        return QueryList(queries=[_info(service, r) for r in records])

    @api.get(
        "/queries/{name}",
        response_model=QueryDetail,
        responses={**NEEDS_TOKEN, **NOT_VISIBLE, **INVALID},
    )
    def show_query(name: str, who: Auth) -> QueryDetail:
        """One query; ``text`` only for its owner and administrators."""
        record = record_of(who.session, name)
        info = _info(service, record)
        live = _live(service, name)
        shown = live.text if live is not None and may_read_text(who.session, record) else None
        return QueryDetail(**info.model_dump(), text=shown)

    @api.get(
        "/queries/{name}/explain",
        response_model=QueryExplain,
        responses={
            **NEEDS_TOKEN,
            **NOT_VISIBLE,
            **INVALID,
            403: {"model": ErrorBody, "description": "not the owner nor an administrator"},
        },
    )
    def explain(name: str, who: Auth) -> QueryExplain:
        """The query's shape, the engine that runs it, its checked SQL and the rewritten
        plan with the security conjuncts its views add: the roles' tuple test and the
        level conjunct (owner and administrators). Never salts or label values."""
        record = record_of(who.session, name)
        if not may_read_text(who.session, record):
            raise Forbidden("only the query's owner or an administrator may explain it")
        live = _live(service, name)
        if live is None:
            raise NotFound("the query is not loaded")
        return _explain(
            name, live.text, list(record.inputs), live.roles, live.level, live.secured_sql
        )

    @api.get("/healthz", response_model=Health)
    def healthz() -> Health:
        """The process serves requests (no token; says nothing else)."""
        return Health(status="ok")

    @api.get(
        "/readyz",
        response_model=Readiness,
        responses={503: {"model": Readiness, "description": "starting or a check fails"}},
    )
    def readyz() -> Any:
        """200 once ingest runs and the previous run's queries are restored, and while
        the catalog answers; 503 before and otherwise (no token)."""
        checks = {
            "catalog": _catalog_reachable(service),
            "ingest": _ingest_active(service),
            "ingest_state": service.halt.reason is None,
            "queries_restored": service.started,
        }
        detail = service.connectors.health()
        if all(checks.values()):
            return Readiness(status="ready", checks=checks, detail=detail)
        status: Literal["starting", "unavailable"] = (
            "starting" if not checks["queries_restored"] else "unavailable"
        )
        body = Readiness(status=status, checks=checks, detail=detail).model_dump()
        return JSONResponse(body, status_code=503)

    @api.get(
        "/metrics",
        response_class=Response,
        responses={
            200: {"content": {CONTENT_TYPE_LATEST: {}}, "description": "Prometheus text"},
            **NEEDS_TOKEN,
            403: {"model": ErrorBody, "description": "not an administrator"},
        },
    )
    def metrics(request: Request) -> Response:
        """Prometheus metrics: an administrator's session token or the scrape token."""
        token = _bearer(request)
        scrape = metrics_token is not None and hmac.compare_digest(
            token.encode(), metrics_token.encode()
        )
        if not scrape and not admin(service.administration.session(token)):
            raise Forbidden("CHANGE SYSTEM (or the scrape token) is needed")
        return Response(service.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    @api.get("/audit", response_model=AuditPage, responses={**NEEDS_TOKEN, **INVALID})
    def audit(
        who: Auth,
        since: datetime | None = None,
        until: datetime | None = None,
        user: Annotated[str | None, Query(max_length=200)] = None,
        action: Annotated[str | None, Query(max_length=64)] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
        before_id: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
    ) -> AuditPage:
        """Audit entries newest first; administrators read all, others their own.

        ``since``/``until``: ISO-8601 (no zone means UTC); ``until`` is exclusive.
        """
        try:
            event = Event(action) if action else None
        except ValueError:
            raise Invalid(
                f"action: unknown audit action (one of {', '.join(e.value for e in Event)})"
            ) from None
        wanted = AuditFilter(
            actor=user,
            event=event,
            since=_epoch(since),
            until=_epoch(until),
            before_id=before_id,
            limit=limit,
            newest_first=True,
        )
        entries = [_audit_record(e) for e in service.security.audit_entries(who.session, wanted)]
        more = entries[-1].id if len(entries) == limit else None
        return AuditPage(entries=entries, next_before_id=more)

    return api


def _bearer(request: Request) -> str:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise Unauthorized("a bearer token is needed")
    return token.strip()


def _epoch(moment: datetime | None) -> float | None:
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _live(service: OperationsHost, name: str) -> Any:
    try:
        return service.queries.get(name)
    except NotFound:
        return None


def _info(service: OperationsHost, record: Any) -> QueryInfo:
    live = _live(service, record.name)
    info = QueryInfo(
        name=record.name,
        owner=record.owner,
        output=record.output_stream,
        inputs=list(record.inputs),
        status="stopped",
    )
    if live is None:
        return info
    info.status = status_of(live)
    info.subscribers = len(getattr(live.delivery, "subscriptions", ()))
    info.delivery_lag_seconds = service.metrics.recent_lag(record.name)
    info.network = _network_of(service, live)
    if info.status == "failed":
        info.error_class, info.failed_at = _failure(live)
    progress = progress_of(live)
    if progress:
        info.last_batch = _int(progress.get("batchId"))
        info.input_rows_per_second = _float(progress.get("inputRowsPerSecond"))
        info.processed_rows_per_second = _float(progress.get("processedRowsPerSecond"))
        durations = progress.get("durationMs")
        if isinstance(durations, dict):
            info.batch_duration_ms = _int(durations.get("triggerExecution"))
    return info


def _network_of(service: OperationsHost, live: Any) -> str | None:
    """What the shared network running ``live`` as a branch reads (None: it runs alone)."""
    for stream, _kind, network in service.cql.switched():
        if live.internal in network.branches:
            return str(stream)
    return None


def _failure(live: Any) -> tuple[str | None, str | None]:
    """Error class and time: the query's own record when it keeps one, else the class
    of its StreamingQuery's exception (never the message, which may quote values)."""
    error_class = getattr(live, "error_class", None)
    failed_at = getattr(live, "failed_at", None)
    if error_class is None and live.handle is not None:
        try:
            failure = live.handle.handle.exception()
        except Exception:
            failure = None
        error_class = failure_class(failure) if failure is not None else "unknown"
    if isinstance(failed_at, int | float):
        failed_at = iso(failed_at)
    elif isinstance(failed_at, datetime):
        failed_at = failed_at.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return error_class, failed_at


def _explain(
    name: str,
    text: str,
    inputs: list[str],
    roles: tuple[str, ...] = (),
    level: QueryLevel | None = None,
    secured_sql: str | None = None,
) -> QueryExplain:
    request = parse_request(text)
    if not isinstance(request, ContinuousQuery):
        raise Invalid("the query's text is not a continuous query")
    shape = plan_shape(request)
    checked = check_query(request.sql, inputs)
    sql = checked.rewrite({s: s for s in checked.streams})
    output = output_level(shape, checked.tree)
    secured = secured_plan(roles, level, output)
    return QueryExplain(
        name=name,
        kind=shape.kind.value,
        engine=ENGINES.get(shape.kind, shape.kind.value),
        aggregate=shape.aggregate,
        streams=list(checked.streams),
        windows=[
            WindowInfo(
                item=item,
                stream=stream,
                kind=window.kind.value,
                size=window.size,
                slide=window.slide,
            )
            for item, stream, window in shape.windows
        ],
        operators=sorted(shape.operators),
        join_keys=[
            f"{k.left_alias}.{k.left_attr} = {k.right_alias}.{k.right_attr}"
            for k in shape.join_keys
        ],
        time_windows=list(shape.time_windows),
        sql=sql,
        level=secured.level,
        security=list(secured.conjuncts),
        labels=list(secured.labels),
        secured_sql=secured_sql,
    )


def _audit_record(entry: Any) -> AuditRecord:
    obj = entry.object
    return AuditRecord(
        id=entry.id,
        at=iso(entry.at) or "",
        actor=entry.actor,
        client=entry.client,
        action=str(entry.event.value if hasattr(entry.event, "value") else entry.event),
        outcome=str(entry.outcome.value if hasattr(entry.outcome, "value") else entry.outcome),
        object=None if obj is None else AuditObject(kind=obj.kind.value, name=obj.name),
        detail=port.jsonable(dict(entry.detail)),
    )


def _catalog_reachable(service: OperationsHost) -> bool:
    try:
        with service.security.engine.connect() as db:
            db.execute(text("SELECT 1"))
        return True
    except Exception:
        return False


def _ingest_active(service: OperationsHost) -> bool:
    streaming = service.ingest_query
    try:
        return bool(streaming is not None and streaming.isActive)
    except Exception:
        return False


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) else None


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None
