"""Attributes a stream's schema marks NOT NULL.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02

``stream_attributes.not_null``: a tuple that leaves such an attribute out, or gives it
``null``, is refused at the landing zone (``missing_attribute``), as the tuple id and
the event time always are. Existing streams keep what they had: every other attribute
may be null.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # ADD COLUMN in place (SQLite too): a batch rebuild would drop the table's
    # catalog-version trigger (0004).
    op.add_column(
        "stream_attributes",
        sa.Column("not_null", sa.Boolean, nullable=False, server_default=sa.false()),
    )


def downgrade() -> None:
    op.drop_column("stream_attributes", "not_null")  # SQLite 3.35+: in place
