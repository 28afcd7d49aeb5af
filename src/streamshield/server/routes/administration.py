"""Administration over HTTPS: users, passwords, roles and the role hierarchy.

A thin layer over :class:`~streamshield.catalog.administration.Administration`, which
decides who may do what (CHANGE SYSTEM on SYSTEM for every change; one's own record and
password for everyone; the role list for every logged-in user) and audits every change.
Its typed refusals become the API's error codes here, each message naming the field.

A role created or a hierarchy edge changed reaches the running engine before the
request answers (:meth:`Pipeline.use_hierarchy`): the next ingest batch labels with it
(an sp naming the new role applies), and query registrations resolve roles with it.
Stored labels keep their meaning because role bit positions and the label width never
change (see :mod:`streamshield.policy.roles`). Running queries whose effective roles
changed are recompiled before the request answers (``ServerService.reconcile_rights``),
and running patterns re-check their rules under the new hierarchy at their next
micro-batch (:mod:`streamshield.cep.running`).
"""

# No ``from __future__ import annotations``: FastAPI must see the real ``Auth`` type.
from collections.abc import Callable
from typing import Annotated, Any, Literal, Protocol, TypeVar

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from streamshield.catalog import administration as adm
from streamshield.server import error_codes as codes
from streamshield.server.auth import Auth
from streamshield.server.errors import Conflict, Forbidden, Invalid, NotFound
from streamshield.server.models import ErrorBody


class AdministrationHost(Protocol):
    """What the administration routes ask of the server besides its catalog: after a
    change of roles, users or the hierarchy, the running queries follow it."""

    security: Any

    def reconcile_rights(self) -> None: ...

    def reconcile_owner(self, user: str) -> None: ...

    def use_hierarchy(self, hierarchy: Any) -> None: ...


T = TypeVar("T")

UserName = Annotated[str, StringConstraints(min_length=1, max_length=200)]
RoleName = Annotated[str, StringConstraints(min_length=1, max_length=100)]
Password = Annotated[str, StringConstraints(max_length=adm.MAX_PASSWORD)]
NewPassword = Annotated[
    str,
    StringConstraints(max_length=adm.MAX_PASSWORD),
    # Documented, checked by the catalog's policy (whose message names the rule broken):
    # the contract must not promise that a shorter password can be set.
    Field(json_schema_extra={"minLength": adm.MIN_PASSWORD}),
]
"""A password being set: the policy's minimum length is part of the contract."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class UserCreate(_Strict):
    name: UserName
    password: NewPassword
    roles: list[RoleName] = Field(default_factory=list, max_length=256)


class UserRoles(_Strict):
    roles: list[RoleName] = Field(max_length=256)


class PasswordReset(_Strict):
    password: NewPassword


class PasswordChange(_Strict):
    current: Password
    new: NewPassword


class RoleCreate(_Strict):
    name: RoleName
    juniors: list[RoleName] = Field(default_factory=list, max_length=256)


class JuniorBody(_Strict):
    junior: RoleName


class UserOut(BaseModel):
    name: str
    roles: list[str]
    disabled: bool


class UserList(BaseModel):
    users: list[UserOut]


class NameOut(BaseModel):
    name: str


class RoleOut(BaseModel):
    name: str
    juniors: list[str]


class RoleList(BaseModel):
    roles: list[RoleOut]


class GrantOut(BaseModel):
    permission: str
    grantee_kind: Literal["user", "role"]
    grantee: str
    grantor: str | None
    grant_option: bool


class GrantList(BaseModel):
    kind: str
    object: str
    grants: list[GrantOut]


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    described = {
        401: "no valid session (none, expired, logged out, or the user was disabled)",
        403: "the caller lacks CHANGE SYSTEM on SYSTEM (or gave a wrong current password)",
        404: "no such user, role or object",
        409: "the name exists, the role capacity is reached, or an administrator would "
        "disable herself",
        422: "invalid field or path parameter: weak password, unknown role, bad name, or a "
        "hierarchy cycle",
        429: "too many wrong passwords: retry later",
    }
    return {c: {"model": ErrorBody, "description": described[c]} for c in codes}


def _answer(fn: Callable[..., T], *args: Any) -> T:
    """Calls the catalog; its administration refusals become the API's errors."""
    try:
        return fn(*args)
    except (adm.UnknownUser, adm.UnknownRole, adm.UnknownObject) as err:
        if err.field == "name":  # the path names it
            raise NotFound(err.message) from None
        raise Invalid(err.message) from None
    except (adm.Exists, adm.RoleCapacityReached, adm.SelfLockout) as err:
        raise Conflict(err.message, codes.EXISTS if isinstance(err, adm.Exists) else None) from None
    except adm.WrongPassword as err:
        raise Forbidden(err.message) from None
    except adm.AdminError as err:  # weak password, bad names, cycles
        raise Invalid(err.message) from None


def _user(info: adm.UserInfo) -> UserOut:
    return UserOut(name=info.name, roles=list(info.roles), disabled=info.disabled)


def _role(info: adm.RoleInfo) -> RoleOut:
    return RoleOut(name=info.name, juniors=list(info.juniors))


def router(service: AdministrationHost) -> APIRouter:
    """The administration routes."""
    api = APIRouter(tags=["administration"])

    def hierarchy_changed(change: tuple[adm.RoleInfo, Any]) -> RoleOut:
        info, hierarchy = change
        service.use_hierarchy(hierarchy)  # running queries: the effective roles of now
        return _role(info)

    # -- users -------------------------------------------------------------------------------

    @api.post(
        "/users", status_code=201, response_model=UserOut, responses=_errors(401, 403, 409, 422)
    )
    def create_user(body: UserCreate, who: Auth) -> UserOut:
        """Create a user with a password (policy: at least 12 characters, not only
        whitespace, not the user name) and roles. Needs CHANGE SYSTEM."""
        sec = service.security
        return _user(_answer(sec.add_user, who.session, body.name, body.password, body.roles))

    @api.get("/users", response_model=UserList, responses=_errors(401, 403))
    def list_users(who: Auth) -> UserList:
        """Every user with roles and state. Needs CHANGE SYSTEM."""
        users = _answer(service.security.users_info, who.session)
        return UserList(users=[_user(u) for u in users])

    @api.get("/users/{name}", response_model=UserOut, responses=_errors(401, 403, 404, 422))
    def show_user(name: str, who: Auth) -> UserOut:
        """One user: oneself, or anyone for a CHANGE SYSTEM holder."""
        return _user(_answer(service.security.user_info, who.session, name))

    @api.put("/users/{name}/roles", response_model=UserOut, responses=_errors(401, 403, 404, 422))
    def set_roles(name: str, body: UserRoles, who: Auth) -> UserOut:
        """Replace a user's roles. Needs CHANGE SYSTEM; grants that relied on a role
        taken away are removed with their cascade."""
        sec = service.security
        info = _answer(sec.change_user_roles, who.session, name, body.roles)
        service.reconcile_owner(name)  # her queries: only roles she holds
        return _user(info)

    @api.post(
        "/users/{name}/password", response_model=NameOut, responses=_errors(401, 403, 404, 422)
    )
    def reset_password(name: str, body: PasswordReset, who: Auth) -> NameOut:
        """Set a user's password (administrator reset). Needs CHANGE SYSTEM."""
        _answer(service.security.reset_password, who.session, name, body.password)
        return NameOut(name=name)

    @api.post("/me/password", response_model=NameOut, responses=_errors(401, 403, 422, 429))
    def change_password(body: PasswordChange, who: Auth) -> NameOut:
        """Change one's own password, proving the current one."""
        _answer(service.security.change_password, who.session, body.current, body.new)
        return NameOut(name=str(who.session.user))

    @api.post(
        "/users/{name}/disable", response_model=UserOut, responses=_errors(401, 403, 404, 409, 422)
    )
    def disable(name: str, who: Auth) -> UserOut:
        """Disable a user: every session of hers ends at once, login refuses her, her
        queries stop (their subscribers get a ``closed`` event) until she is enabled."""
        info = _answer(service.security.set_disabled, who.session, name, True)
        service.reconcile_owner(name)
        return _user(info)

    @api.post("/users/{name}/enable", response_model=UserOut, responses=_errors(401, 403, 404, 422))
    def enable(name: str, who: Auth) -> UserOut:
        """Enable a disabled user again; her queries recorded as running start again."""
        info = _answer(service.security.set_disabled, who.session, name, False)
        service.reconcile_owner(name)
        return _user(info)

    # -- grants -----------------------------------------------------------------------------

    @api.get("/grants", response_model=GrantList, responses=_errors(401, 403, 404, 422))
    def list_grants(
        who: Auth,
        kind: Annotated[str, Query(pattern=r"^(system|schema|stream|query)$")],
        object: Annotated[str, Query(min_length=1, max_length=128)],
    ) -> GrantList:
        """The grants stored on one object (what ``POST``/``DELETE /grants`` change).
        Needs CHANGE SYSTEM, checked before the object is looked up."""
        found = _answer(service.security.grants_info, who.session, kind, object)
        return GrantList(
            kind=kind,
            object=object,
            grants=[GrantOut(**vars(g)) for g in found],
        )

    # -- roles -------------------------------------------------------------------------------

    @api.get("/roles", response_model=RoleList, responses=_errors(401))
    def list_roles(who: Auth) -> RoleList:
        """Every role with its direct juniors (any logged-in user)."""
        roles = _answer(service.security.roles_info, who.session)
        return RoleList(roles=[_role(r) for r in roles])

    @api.post(
        "/roles", status_code=201, response_model=RoleOut, responses=_errors(401, 403, 409, 422)
    )
    def create_role(body: RoleCreate, who: Auth) -> RoleOut:
        """Create a role (with direct juniors); live at once. Needs CHANGE SYSTEM."""
        sec = service.security
        change = _answer(sec.create_role, who.session, body.name, body.juniors)
        return hierarchy_changed(change)

    @api.post(
        "/roles/{name}/juniors", response_model=RoleOut, responses=_errors(401, 403, 404, 422)
    )
    def add_junior(name: str, body: JuniorBody, who: Auth) -> RoleOut:
        """Make ``junior`` a direct junior of the role (a cycle is refused). Needs
        CHANGE SYSTEM."""
        change = _answer(service.security.add_junior, who.session, name, body.junior)
        return hierarchy_changed(change)

    @api.delete(
        "/roles/{name}/juniors/{junior}",
        response_model=RoleOut,
        responses=_errors(401, 403, 404, 422),
    )
    def remove_junior(name: str, junior: str, who: Auth) -> RoleOut:
        """Remove a direct junior. Needs CHANGE SYSTEM. Tuples labelled before keep the
        readers they were labelled with (labels are immutable)."""
        change = _answer(service.security.remove_junior, who.session, name, junior)
        return hierarchy_changed(change)

    return api
