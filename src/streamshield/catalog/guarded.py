"""A change of the security catalog that the caller's rights decide, in one shape.

Every such change is: one write transaction; who acts; a check (a denial of OxRBAC or
another refusal, e.g. a quota); the change itself; an audit entry of its success in the
same transaction. A refusal rolls the transaction back and is audited on its own (the
failed one left nothing). Written once here, the catalog's methods keep only their check
and their change, so none of them can forget to audit, or audit a change that was rolled
back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NoReturn

from sqlalchemy.engine import Connection

from streamshield.catalog import audit
from streamshield.catalog import oxrbac as ox
from streamshield.catalog.audit import Event, Outcome
from streamshield.catalog.errors import PermissionDenied, SecurityError, from_denial
from streamshield.catalog.oxrbac import SYSTEM, ObjectRef, Permission, Subject


class _Refused(Exception):
    """Carries a refusal out of the transaction (which rolls it back)."""

    def __init__(self, error: SecurityError) -> None:
        super().__init__(error)
        self.error = error


@dataclass(frozen=True)
class Change:
    """What the body of a guarded change works with."""

    db: Connection
    subject: Subject
    acl: ox.AclState
    event: Event
    now: float

    @property
    def actor(self) -> str:
        return self.subject.user

    def refuse(self, problem: ox.Denial | SecurityError) -> NoReturn:
        """Refuses the change: ``problem`` is a denial or an error."""
        raise _Refused(from_denial(problem) if isinstance(problem, ox.Denial) else problem)

    def refuse_if(self, problem: ox.Denial | SecurityError | None) -> None:
        """Refuses the change when ``problem`` is a denial or an error (None: go on)."""
        if problem is not None:
            self.refuse(problem)

    def done(self, obj: ObjectRef | None = None, detail: dict[str, Any] | None = None) -> None:
        """Audits the change as made (in its transaction: it commits with it)."""
        audit.record(
            self.db, self.now, self.event, Outcome.OK, actor=self.actor, obj=obj, detail=detail
        )


class GuardedChanges:
    """Mixed into :class:`~streamshield.catalog.security.SecurityCatalog`, which provides
    the transactions, subjects, ACL state and the audited refusal."""

    _write: Callable[[], Any]
    _subject: Callable[..., Subject]
    _acl: Callable[[Connection], ox.AclState]
    _refuse: Callable[..., SecurityError]
    clock: Callable[[], float]

    @contextmanager
    def _guarded(self, who: Any, event: Event) -> Iterator[Change]:
        """A change by ``who`` (a session, or a user acting with all her roles)."""
        actor: str | None = None
        try:
            with self._write() as db:
                subject = self._subject(db, who)
                actor = subject.user
                yield Change(db, subject, self._acl(db), event, self.clock())
        except _Refused as refused:
            raise self._refuse(actor, event, refused.error) from None

    @contextmanager
    def _administering(self, who: Any, event: Event) -> Iterator[tuple[Connection, str]]:
        """A change only CHANGE SYSTEM on SYSTEM allows (every user, role and level
        change). Yields (connection, acting user); the body audits its own success, as it
        knows the detail."""
        with self._guarded(who, event) as change:
            denial = ox.require(change.acl, change.subject, Permission.CHANGE_SYSTEM, SYSTEM)
            change.refuse_if(None if denial is None else not_admin())
            yield change.db, change.actor


def not_admin() -> PermissionDenied:
    """Always 403, never "not found": SYSTEM exists for everyone, and saying so leaks
    nothing, while a 404 for POST /users would only confuse."""
    return PermissionDenied(
        Permission.CHANGE_SYSTEM, SYSTEM, "permission denied: CHANGE SYSTEM on system is needed"
    )
