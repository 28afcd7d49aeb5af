"""The catalog's objects and their grants: what a caller may see, and what she adds.

``GET /catalog`` lists the schemas, streams and queries the caller may view (VIEW
OBJECT); ``GET /streams/{name}`` describes one. ``POST /schemas`` and ``POST /streams``
add objects the caller then owns; ``POST``/``DELETE /grants`` grant and revoke a
permission on one (its owner, a grant-option holder or an administrator). The checks
are :class:`~streamshield.server.stream_service.StreamService`'s and
:class:`~streamshield.server.administration_service.AdministrationService`'s
(server/access_gates.py): an object the caller may not view is a 404, one she may
view but not use a 403.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from fastapi import APIRouter

from streamshield.server.auth import Auth
from streamshield.server.models import (
    CatalogView,
    GrantAnswer,
    GrantBody,
    NamedItem,
    RevokeAnswer,
    SchemaBody,
    ServerPolicies,
    ServerPolicyBody,
    ServerPolicyOut,
    StreamBody,
    StreamDefinitionOut,
    StreamInfo,
    TagsBody,
)
from streamshield.server.openapi import AUTHED, errors, links
from streamshield.server.schemas import SchemaDef

if TYPE_CHECKING:
    from streamshield.catalog.security import Session


class CatalogStreams(Protocol):
    """What the catalog routes ask of the server's streams
    (:class:`~streamshield.server.stream_service.StreamService`)."""

    def catalog_view(self, session: Session) -> dict[str, list[dict]]: ...

    def stream(self, session: Session, name: str) -> dict: ...

    def add_schema(self, session: Session, schema: SchemaDef) -> dict: ...

    def add_stream(self, session: Session, name: str, schema: str) -> dict: ...

    def set_tags(self, session: Session, name: str, tags: dict[str, list[str]]) -> dict: ...

    def set_server_policy(self, session: Session, scope: str, cql_text: str, mode: str) -> dict: ...

    def server_policies(self, session: Session) -> list[dict]: ...


class Grants(Protocol):
    """What the catalog routes ask of the server's administration
    (:class:`~streamshield.server.administration_service.AdministrationService`)."""

    def grant(self, session: Session, body: dict, revoke: bool = False) -> None: ...


def router(streams: CatalogStreams, administration: Grants) -> APIRouter:
    """The catalog routes of one server: its streams and who may use them."""
    api = APIRouter()

    @api.get("/catalog", response_model=CatalogView, responses=errors(*AUTHED))
    def catalog(who: Auth) -> dict:
        return streams.catalog_view(who.session)

    @api.get("/streams/{name}", response_model=StreamInfo, responses=errors(*AUTHED, 404, 422))
    def stream(name: str, who: Auth) -> dict:
        return streams.stream(who.session, name)

    @api.post(
        "/schemas",
        status_code=201,
        response_model=NamedItem,
        responses={
            **errors(*AUTHED, 403, 404, 409, 422),
            **links(201, "The schema, created", ("POST", "/streams", "body.schema")),
        },
    )
    def add_schema(body: SchemaBody, who: Auth) -> dict:
        attributes = tuple((n, t) for n, t in body.attributes)
        schema = SchemaDef(
            body.name, attributes, body.tid, body.event_time, tuple(body.not_null), body.tags
        )
        return streams.add_schema(who.session, schema)

    @api.post(
        "/streams",
        status_code=201,
        response_model=StreamDefinitionOut,
        responses={
            **errors(*AUTHED, 403, 404, 409, 422),
            **links(
                201,
                "The stream, created",
                ("GET", "/streams/{name}", "name"),
                ("GET", "/streams/{name}/ingest", "name"),
                ("POST", "/streams/{name}/elements", "name"),
                ("GET", "/levels/streams/{name}", "name"),
                ("PUT", "/levels/streams/{name}", "name"),
                ("POST", "/grants", "body.object"),
            ),
        },
    )
    def add_stream(body: StreamBody, who: Auth) -> dict:
        return streams.add_stream(who.session, body.name, body.schema_name)

    @api.put(
        "/streams/{name}/tags",
        response_model=StreamDefinitionOut,
        responses=errors(*AUTHED, 403, 404, 422),
    )
    def set_tags(name: str, body: TagsBody, who: Auth) -> dict:
        """Replaces an input stream's attribute tags (CHANGE SYSTEM; audited). Tag
        policies follow from the next ingest micro-batch; labelled tuples keep theirs."""
        return streams.set_tags(who.session, name, dict(body.tags))

    @api.get(
        "/server-policies",
        response_model=ServerPolicies,
        responses=errors(*AUTHED, 403),
    )
    def server_policies(who: Auth) -> dict:
        return {"policies": streams.server_policies(who.session)}

    @api.put(
        "/server-policies/{scope}",
        response_model=ServerPolicyOut,
        responses=errors(*AUTHED, 403, 404, 422),
    )
    def set_server_policy(scope: str, body: ServerPolicyBody, who: Auth) -> dict:
        """Stores the server policy of a stream or of a stream-name glob (``ward*``,
        ``*``: also streams added later), CHANGE SYSTEM, audited; in force from the next
        ingest micro-batch."""
        return streams.set_server_policy(who.session, scope, body.cql, body.mode)

    @api.post("/grants", response_model=GrantAnswer, responses=errors(*AUTHED, 403, 404, 422))
    def grant(body: GrantBody, who: Auth) -> dict:
        administration.grant(who.session, body.model_dump())
        return {"granted": True}

    @api.delete("/grants", response_model=RevokeAnswer, responses=errors(*AUTHED, 403, 404, 422))
    def revoke(body: GrantBody, who: Auth) -> dict:
        administration.grant(who.session, body.model_dump(), revoke=True)
        return {"revoked": True}

    return api
