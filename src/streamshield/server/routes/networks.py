"""Shared query networks and their privacy switches (docs/query-sharing.md).

``GET /networks`` shows, per network (a stream's selections, its windowed queries, or
the queries sharing one join of two streams, run as one), the privacy switches placed in
it (PrS Algorithm 2) with their state: initial and in-network switches an access
counter, terminal switches the users they let the query's output through to, all closed
until someone receives. Administrators see every network and the users of each terminal
switch; everyone else sees only the switches governing their own queries, with other
queries counted, not named, and receivers counted, not named.

``POST /networks/sps`` lets an administrator inject a query-scoped sp by hand (what the
server's authorization part does on every subscription change): applied at the next
micro-batch of the query's network. A query that does not exist is refused (404) and an
sp that is not well formed is refused (422); neither opens anything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Protocol

from fastapi import APIRouter
from pydantic import BaseModel, Field

from streamshield.server.auth import Auth
from streamshield.server.openapi import AUTHED, errors
from streamshield.server.routes.operations import iso

if TYPE_CHECKING:
    from streamshield.catalog.security import Session


class SwitchView(BaseModel):
    id: str
    kind: Literal["initial", "in-network", "terminal"]
    queries: list[str]
    """The caller's queries this switch governs (all of them for administrators)."""
    other_queries: int
    open: bool
    counter: int | None = None
    """Initial and in-network switches: how many users receive a query it governs."""
    receivers: int | None = None
    """Terminal switches: how many users receive the query's output."""
    users: list[str] | None = None
    """Terminal switches, administrators only: who receives the output."""
    since: str
    """When it last opened or closed (ISO-8601 UTC)."""


class NetworkView(BaseModel):
    stream: str
    """The stream it reads; a join: ``<left> JOIN <right>``."""
    kind: Literal["selections", "windows", "joins"] = "selections"
    """What the network shares: the stream's selections (and projections), its windowed
    queries (window nodes, each branch a query over its node), or one windowed join of
    two streams (its windows and pairs, each branch a query over the pairs)."""
    queries: list[str]
    levels: dict[str, str | None] = {}
    """The security level each listed query runs at (null while levels are off): the
    console draws the network once per level, each with the switches of its queries."""
    switches: list[SwitchView]


class NetworksView(BaseModel):
    networks: list[NetworkView]


class QuerySpBody(BaseModel):
    """A query-scoped sp: ``user`` may (``+``) or may no longer (``-``) receive ``query``."""

    query: str = Field(min_length=1, max_length=200)
    user: str = Field(min_length=1, max_length=200)
    sign: Literal["+", "-"]


class QuerySpAnswer(BaseModel):
    queued: bool


class NetworksApi(Protocol):
    """What the network routes ask of the server
    (:class:`~streamshield.server.switch_service.SwitchService`)."""

    def networks(self, session: Session) -> list[dict]: ...

    def inject_as(self, session: Session, query: str, user: str, sign: str) -> None: ...


def router(switches: NetworksApi) -> APIRouter:
    api = APIRouter(tags=["networks"])

    @api.get("/networks", response_model=NetworksView, responses=errors(*AUTHED))
    def networks(who: Auth) -> dict:
        """Shared networks and the state of their privacy switches."""
        shown = switches.networks(who.session)
        for network in shown:
            for switch in network["switches"]:
                switch["since"] = iso(switch["since"])
        return {"networks": shown}

    @api.post(
        "/networks/sps",
        response_model=QuerySpAnswer,
        responses=errors(*AUTHED, 403, 404, 422),
    )
    def inject(body: QuerySpBody, who: Auth) -> dict:
        """Inject a query-scoped sp (CHANGE SYSTEM); it applies at the next micro-batch.
        A ``+`` for a user who receives already or a ``-`` for one who does not changes
        nothing and is audited."""
        switches.inject_as(who.session, body.query, body.user, body.sign)
        return {"queued": True}

    return api
