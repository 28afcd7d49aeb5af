"""Errors of the security catalog, worded so that they reveal nothing the caller may not see.

* :class:`AuthError` always carries one generic message: unknown user, wrong password,
  expired, unknown or forged token all read the same.
* :class:`PermissionDenied` names the permission and the object only when the caller
  may see the object; otherwise it is a :class:`NotFound` that reads exactly like the
  message for an object that does not exist.
"""

from __future__ import annotations

from collections.abc import Iterable

from streamshield.catalog.oxrbac import Denial, Kind, ObjectRef, Permission

AUTH_FAILED = "authentication failed"


class SecurityError(Exception):
    """Base of the security catalog's refusals."""


class AuthError(SecurityError):
    """Authentication failed, or the session is not (or no longer) valid."""

    def __init__(self, message: str = AUTH_FAILED) -> None:
        super().__init__(message)


class Throttled(AuthError):
    """Too many failed logins for this user name or client; retry after some seconds."""

    def __init__(self, retry_after: float) -> None:
        super().__init__("too many failed logins: retry later")
        self.retry_after = retry_after


class RoleActivationError(AuthError):
    """The password was right but the requested roles cannot be activated: the message
    lists the roles the user holds (she proved who she is), so she can ask for one."""

    def __init__(self, held: Iterable[str] = ()) -> None:
        roles = ", ".join(sorted(held)) or "none"
        super().__init__(f"the requested roles cannot be activated; you hold: {roles}")
        self.held = tuple(sorted(held))


class PermissionDenied(SecurityError):
    """A visible object on which the caller lacks ``permission``."""

    def __init__(self, permission: Permission, obj: ObjectRef, message: str | None = None) -> None:
        super().__init__(
            message
            or f"permission denied: {permission.value} on {_named(obj)} is needed; its owner or "
            "an administrator grants it (docs/permissions.md)"
        )
        self.permission = permission
        self.object = obj


def _named(obj: ObjectRef) -> str:
    """``stream HeartRate``; SYSTEM, whose name is its kind, as ``system``."""
    return obj.kind.value if obj.kind is Kind.SYSTEM else str(obj)


class NotFound(PermissionDenied):
    """The object does not exist or the caller may not see it (indistinguishable)."""

    def __init__(self, permission: Permission, obj: ObjectRef) -> None:
        super().__init__(
            permission,
            obj,
            f"not found: {obj} (no such {obj.kind.value}, or you lack VIEW OBJECT on it)",
        )


class GrantNotFound(NotFound):
    """A revocation that matches no grant: saying so beats a success that changed nothing."""

    def __init__(self, permission: Permission, obj: ObjectRef, grantee: object) -> None:
        PermissionDenied.__init__(
            self, permission, obj, f"no grant of {permission.value} on {obj} to {grantee}"
        )


class AlreadyExists(SecurityError):
    """The name is taken (names are global, so this is said even for unseen objects)."""


def from_denial(denial: Denial) -> PermissionDenied:
    if denial.visible:
        return PermissionDenied(denial.permission, denial.obj)
    return NotFound(denial.permission, denial.obj)
