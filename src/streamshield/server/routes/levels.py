"""Chinese-Wall levels over HTTPS: COI and CI classes, stream and channel levels,
clearances, and the level a session runs at (paper 2; ``docs/chinese-wall.md``).

A thin layer over :class:`~streamshield.catalog.levels.Levels`, which decides who may
do what (CHANGE SYSTEM for every definition, level and clearance; one's own clearance
and session level for everyone) and audits every change. Its typed refusals become the
API's errors here; each message names the field (``level``, ``companies``, ...), and a
level is written ``[1, B]``, ``[⊥, T]`` or in ASCII ``[_, T]``.

Responses write levels with ``⊥``; requests take either form.
"""

# No ``from __future__ import annotations``: FastAPI must see the real ``Auth`` type.
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, Protocol, TypeVar

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from streamshield.catalog import levels as lv
from streamshield.server import error_codes as codes
from streamshield.server.auth import Auth
from streamshield.server.errors import Conflict, Forbidden, Invalid, NotFound
from streamshield.server.models import ErrorBody

if TYPE_CHECKING:
    from streamshield.catalog.security import Session

T = TypeVar("T")

ClassName = Annotated[str, StringConstraints(min_length=1, max_length=64)]
Company = Annotated[str, StringConstraints(min_length=1, max_length=64)]
LevelText = Annotated[
    str,
    StringConstraints(min_length=2, max_length=4096),
    Field(description="A level: one component per COI class, in class order", examples=["[1, B]"]),
]
MAX_COMPANIES = 4096


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class CoiCreate(_Strict):
    name: ClassName = Field(examples=["COI1"])
    companies: list[Company] = Field(min_length=2, max_length=MAX_COMPANIES, examples=[["1", "2"]])
    capacity: int | None = Field(
        default=None,
        description="Companies the level labels make room for (a multiple of 64, default "
        "64); only with the first class: it is fixed from then on",
    )


class CompanyAdd(_Strict):
    company: Company


class CiCreate(_Strict):
    name: ClassName = Field(examples=["service5"])
    companies: list[Company] = Field(min_length=1, max_length=MAX_COMPANIES, examples=[["1", "B"]])


class LevelBody(_Strict):
    level: LevelText


class CoiOut(BaseModel):
    name: str
    companies: list[str]


class CiOut(BaseModel):
    name: str
    companies: list[str]
    level: str = Field(description="The CI class as a level: its companies, ⊥ elsewhere")


class ClassesOut(BaseModel):
    coi_classes: list[CoiOut] = Field(description="In component order")
    ci_classes: list[CiOut]
    capacity: int | None = Field(description="Companies a level label has room for")
    public: str | None = Field(description="The bottom level, null while no class exists")
    trusted: str | None = Field(description="The top level, null while no class exists")


class ChannelOut(BaseModel):
    provider: str
    level: str


class StreamLevelOut(BaseModel):
    stream: str
    level: str = Field(description="Trusted ([T, ...]) while none is assigned")
    assigned: bool = Field(description="False: no level was set, the stream is at trusted")
    channels: list[ChannelOut] = Field(
        description="Providers sending at a level of their own (shown to administrators only)"
    )


class ClearanceOut(BaseModel):
    user: str
    clearance: str = Field(description="Public ([⊥, ...]) while none is set")


class ClearanceSet(ClearanceOut):
    sessions_lowered: int = Field(
        description="Her sessions whose level the new clearance no longer dominates; they "
        "now run at public"
    )


class SessionLevelOut(BaseModel):
    user: str
    clearance: str
    level: str = Field(description="The level this session's queries run at (public if none)")


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    described = {
        401: "no valid session (none, expired, logged out, or the user was disabled)",
        403: "the caller lacks CHANGE SYSTEM on SYSTEM, or the level is above her clearance "
        "(error above_clearance)",
        404: "no such COI class, input stream, user (or provider) or channel level (named in "
        "the path), or a stream the caller may not see",
        409: "the name is taken (exists), no COI class is defined yet, the label capacity is "
        "reached, or a stream level would not dominate its channels' levels",
        422: "invalid field: malformed level text, unknown company, a company "
        "in the wrong class, a CI class with two companies of one COI class, a COI class "
        "with fewer than two companies, a bad name",
    }
    return {c: {"model": ErrorBody, "description": described[c]} for c in codes}


def _answer(fn: Callable[..., T], *args: Any) -> T:
    """Calls the catalog; its level refusals become the API's errors."""
    try:
        return fn(*args)
    except lv.UnknownLevelObject as err:  # a class, stream, user or channel the path names
        raise NotFound(err.message) from None
    except lv.LevelExists as err:
        raise Conflict(err.message, codes.EXISTS) from None
    except lv.LevelConflict as err:
        raise Conflict(err.message) from None
    except lv.AboveClearance as err:
        raise Forbidden(err.message, codes.ABOVE_CLEARANCE) from None
    except lv.InvalidLevel as err:
        raise Invalid(err.message, codes.invalid_level(err.kind) if err.kind else None) from None
    except lv.LevelError as err:
        raise Invalid(err.message) from None


def _stream(info: lv.StreamLevelInfo) -> StreamLevelOut:
    return StreamLevelOut(
        stream=info.stream,
        level=info.level,
        assigned=info.assigned,
        channels=[ChannelOut(provider=p, level=level) for p, level in info.channels],
    )


def _session(info: lv.SessionLevelInfo) -> SessionLevelOut:
    return SessionLevelOut(user=info.user, clearance=info.clearance, level=info.level)


class LevelsHost(Protocol):
    """What the level routes ask of the server besides its catalog: after a change of
    clearances or levels, the running queries follow it."""

    security: Any

    def reconcile_rights(self) -> None: ...


def router(service: LevelsHost) -> APIRouter:
    """The level routes (tag ``levels``)."""
    api = APIRouter(tags=["levels"])

    # -- classes -----------------------------------------------------------------------------

    @api.get("/levels", response_model=ClassesOut, responses=_errors(401))
    def classes(who: Auth) -> ClassesOut:
        """The COI classes (component order) and CI classes. Any logged-in user."""
        info = _answer(service.security.classes_info, who.session)
        return ClassesOut(
            coi_classes=[CoiOut(name=c.name, companies=list(c.companies)) for c in info.coi],
            ci_classes=[
                CiOut(name=c.name, companies=list(c.companies), level=c.level) for c in info.ci
            ],
            capacity=info.capacity,
            public=info.public,
            trusted=info.trusted,
        )

    @api.post(
        "/levels/coi",
        status_code=201,
        response_model=CoiOut,
        responses=_errors(401, 403, 409, 422),
    )
    def define_coi(body: CoiCreate, who: Auth) -> CoiOut:
        """Define a conflict-of-interest class of two or more competing companies; it
        becomes the next component of every level (levels stored before get ``⊥``
        there). A company belongs to one class. Needs CHANGE SYSTEM."""
        sec = service.security
        info = _answer(sec.define_coi_class, who.session, body.name, body.companies, body.capacity)
        return CoiOut(name=info.name, companies=list(info.companies))

    @api.post(
        "/levels/coi/{name}/companies",
        response_model=CoiOut,
        responses=_errors(401, 403, 404, 409, 422),
    )
    def add_company(name: str, body: CompanyAdd, who: Auth) -> CoiOut:
        """Add a company to a COI class (``T`` of the class then covers it too). Needs
        CHANGE SYSTEM."""
        info = _answer(service.security.add_company, who.session, name, body.company)
        return CoiOut(name=info.name, companies=list(info.companies))

    @api.post(
        "/levels/ci",
        status_code=201,
        response_model=CiOut,
        responses=_errors(401, 403, 409, 422),
    )
    def define_ci(body: CiCreate, who: Auth) -> CiOut:
        """Define a complementing-interest class: known companies, at most one of each
        COI class (Definition 2). Needs CHANGE SYSTEM."""
        info = _answer(service.security.define_ci_class, who.session, body.name, body.companies)
        return CiOut(name=info.name, companies=list(info.companies), level=info.level)

    # -- streams and channels ----------------------------------------------------------------

    @api.get(
        "/levels/streams/{name}",
        response_model=StreamLevelOut,
        responses=_errors(401, 404, 409, 422),
    )
    def stream_level(name: str, who: Auth) -> StreamLevelOut:
        """An input stream's level (administrators, and users who may see the stream)
        and its channels' levels (administrators only; others get an empty list)."""
        return _stream(_answer(service.security.stream_level_info, who.session, name))

    @api.put(
        "/levels/streams/{name}",
        response_model=StreamLevelOut,
        responses=_errors(401, 403, 404, 409, 422),
    )
    def set_stream_level(name: str, body: LevelBody, who: Auth) -> StreamLevelOut:
        """Set an input stream's level; it must dominate its channels' levels. Tuples
        are labelled with it at secure ingest. Needs CHANGE SYSTEM."""
        sec = service.security
        return _stream(_answer(sec.set_stream_level, who.session, name, body.level))

    @api.put(
        "/levels/streams/{name}/channels/{provider}",
        response_model=StreamLevelOut,
        responses=_errors(401, 403, 404, 409, 422),
    )
    def set_channel_level(name: str, provider: str, body: LevelBody, who: Auth) -> StreamLevelOut:
        """Set the level of one provider's tuples on the stream (the provider is a
        company's sender); it must be dominated by the stream's level. Needs CHANGE
        SYSTEM."""
        sec = service.security
        return _stream(_answer(sec.set_channel_level, who.session, name, provider, body.level))

    @api.delete(
        "/levels/streams/{name}/channels/{provider}",
        response_model=StreamLevelOut,
        responses=_errors(401, 403, 404, 409, 422),
    )
    def remove_channel_level(name: str, provider: str, who: Auth) -> StreamLevelOut:
        """The provider's tuples are at the stream's level again. Needs CHANGE SYSTEM."""
        sec = service.security
        return _stream(_answer(sec.remove_channel_level, who.session, name, provider))

    # -- clearances and the session's level --------------------------------------------------

    @api.get(
        "/users/{name}/clearance",
        response_model=ClearanceOut,
        responses=_errors(401, 403, 404, 409, 422),
    )
    def clearance(name: str, who: Auth) -> ClearanceOut:
        """A user's clearance: one's own, or anyone's for a CHANGE SYSTEM holder."""
        level = _answer(service.security.clearance_of, who.session, name)
        return ClearanceOut(user=name, clearance=level)

    @api.put(
        "/users/{name}/clearance",
        response_model=ClearanceSet,
        responses=_errors(401, 403, 404, 409, 422),
    )
    def set_clearance(name: str, body: LevelBody, who: Auth) -> ClearanceSet:
        """Set a user's clearance, the highest level her sessions may activate. Her
        sessions above the new clearance drop to public at once. Needs CHANGE SYSTEM."""
        sec = service.security
        level, lowered = _answer(sec.set_clearance, who.session, name, body.level)
        service.reconcile_rights()  # her queries above it stop
        return ClearanceSet(user=name, clearance=level, sessions_lowered=lowered)

    @api.get("/me/level", response_model=SessionLevelOut, responses=_errors(401, 409))
    def my_level(who: Auth) -> SessionLevelOut:
        """The caller's clearance and the level her session runs at."""
        return _session(_answer(service.security.session_level_info, who.session))

    @api.put("/me/level", response_model=SessionLevelOut, responses=_errors(401, 403, 409, 422))
    def activate(body: LevelBody, who: Auth) -> SessionLevelOut:
        """Run this session at a level dominated by one's clearance (403
        above_clearance otherwise). Also possible at login (``level`` in POST /login)."""
        return _session(_answer(service.security.activate_level, who.session, body.level))

    return api


def activate_at_login(security: Any, session: "Session", level: str | None) -> str | None:
    """Activates ``level`` in a session just opened by POST /login; on refusal the
    session is ended before the error leaves, so its token is never handed out."""
    if level is None:
        return None
    try:
        return _answer(security.activate_level, session, level).level
    except BaseException:
        security.logout(session.token)
        raise
