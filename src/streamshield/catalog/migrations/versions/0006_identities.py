"""Sessions opened by OpenID Connect tokens, and the identities users are bound to.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-04

``sessions.issuer`` and ``sessions.issued_at``: a session opened by a bearer token of a
configured issuer records that issuer and the token's ``iat``, so that a newer token of
the same user narrows her older token sessions to its roles (NULL: a password login).
``identities``: the (issuer, subject) a user was bound to at her first token; a token
of that issuer naming her but with another subject is refused. No catalog-version
trigger: a binding is read only when a session is opened, and the session row (which
has its trigger) is what every later check reads.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # ADD COLUMN in place (SQLite too): a batch rebuild would drop the table's
    # catalog-version trigger (0004).
    op.add_column("sessions", sa.Column("issuer", sa.String(500)))
    op.add_column("sessions", sa.Column("issued_at", sa.Float))
    op.create_table(
        "identities",
        sa.Column("issuer", sa.String(500), primary_key=True),
        sa.Column("subject", sa.String(500), primary_key=True),
        sa.Column("user_name", sa.String(200), nullable=False),
        sa.Column("linked_at", sa.Float, nullable=False),
    )
    op.create_index("identities_user", "identities", ["issuer", "user_name"], unique=True)


def downgrade() -> None:
    op.drop_index("identities_user", "identities")
    op.drop_table("identities")
    op.drop_column("sessions", "issued_at")  # SQLite 3.35+: in place
    op.drop_column("sessions", "issuer")
