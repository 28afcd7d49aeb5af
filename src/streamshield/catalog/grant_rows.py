"""Removing grant rows from the catalog, one or every one the rules no longer support.

Both the security catalog (a revocation's cascade, a role taken away) and administration
(a junior removed from the hierarchy) remove grants: each through these two functions, on
the caller's own transaction, so that a removal is one rule wherever it is made.
"""

from __future__ import annotations

from sqlalchemy import Connection, delete

from streamshield.catalog import oxrbac as ox
from streamshield.catalog import tables as t


def delete_grant(db: Connection, grant: ox.Grant) -> None:
    """Removes ``grant``'s row (every field of it matched: another grantor's equal grant
    stays)."""
    c = t.grants.c
    db.execute(
        delete(t.grants).where(
            c.permission == grant.permission.value,
            c.obj_kind == grant.obj.kind.value,
            c.obj_name == grant.obj.name,
            c.grantee_kind == grant.grantee.kind.value,
            c.grantee == grant.grantee.name,
            c.grantor == grant.grantor,
        )
    )


def drop_unsupported(db: Connection, state: ox.AclState) -> int:
    """Removes every grant of ``state`` its grantor's rights no longer support (the
    cascade of a revocation); the number removed."""
    doomed = state.grants - ox.supported(state)
    for grant in doomed:
        delete_grant(db, grant)
    return len(doomed)
