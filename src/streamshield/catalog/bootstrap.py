"""The first administrator of a storage root (``streamshield admin init``).

A fresh root has no user, so nobody could log in to create one: this runs next to
the catalog (no server) and creates

* the administrators' role (``ADMIN`` unless told otherwise), appended to the stored
  hierarchy, holding CHANGE SYSTEM on SYSTEM, so that every later holder of the role
  administers users and roles too;
* the first user, holding that role and owning SYSTEM (the bootstrap rule of
  :meth:`SecurityCatalog.create_user`), with a password meeting the policy.

It refuses when any user exists (the root has an administrator already: use the API),
and it is the one moment the root's role capacity (label width) may be chosen: later it
is fixed by the labels stored.
"""

from __future__ import annotations

from streamshield.catalog.administration import AdminError, check_password, check_role_name
from streamshield.catalog.database import transaction
from streamshield.catalog.oxrbac import SYSTEM, Grantee, Permission
from streamshield.catalog.security import SecurityCatalog
from streamshield.catalog.store import (
    load_hierarchy,
    role_capacity,
    set_role_capacity,
    store_hierarchy,
)
from streamshield.catalog.tables import users
from streamshield.policy.roles import RoleCapacityError


class AlreadyInitialised(AdminError):
    """The root has users already; the first administrator exists."""


def init_admin(
    security: SecurityCatalog,
    user: str,
    password: str,
    role: str = "ADMIN",
    role_capacity_wanted: int | None = None,
) -> None:
    """Creates the first administrator (see the module doc); AdminError when refused."""
    check_role_name(role, "role")
    check_password(password, user)
    if role_capacity_wanted is not None and (
        role_capacity_wanted <= 0 or role_capacity_wanted % 64
    ):
        raise AdminError("role capacity: a positive multiple of 64", "role_capacity")
    with transaction(security.engine, write=True) as db:
        if db.execute(users.select().limit(1)).first() is not None:
            raise AlreadyInitialised(
                "this root has users already: its administrator exists (log in and use "
                "'streamshield client user create')",
                "user",
            )
        hierarchy = load_hierarchy(db)
        if role_capacity_wanted is not None and role_capacity_wanted != role_capacity(db):
            if hierarchy.roles:
                raise AdminError(
                    "role capacity: fixed once roles exist (labels may be stored)",
                    "role_capacity",
                )
            set_role_capacity(db, role_capacity_wanted)
            hierarchy = load_hierarchy(db)
        if role not in hierarchy.juniors:
            try:
                store_hierarchy(db, hierarchy.with_role(role))
            except RoleCapacityError as err:
                raise AdminError(f"role: {err}", "role") from None
    try:
        security.create_user(user, password, [role])
    except ValueError as err:
        raise AdminError(f"user: {err}", "user") from None
    session = security.login(user, password, [role])
    try:
        security.grant(session, Permission.CHANGE_SYSTEM, SYSTEM, Grantee.role(role))
    finally:
        security.logout(session.token)
