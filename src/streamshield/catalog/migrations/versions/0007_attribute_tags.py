"""Classification tags on a stream's attributes.

Revision ID: 0007
Revises: 0006

``stream_attributes.tags``: the attribute's tags (``PHI``, ``PII``), upper case,
space-separated in sorted order; empty for none. A server policy may address every
attribute so tagged (``ATTRIBUTES: TAGGED PHI``). Existing streams keep what they had:
no attribute carries a tag.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # ADD COLUMN in place (SQLite too): a batch rebuild would drop the table's
    # catalog-version trigger (0004).
    op.add_column(
        "stream_attributes",
        sa.Column("tags", sa.Text, nullable=False, server_default=""),
    )


def downgrade() -> None:
    op.drop_column("stream_attributes", "tags")  # SQLite 3.35+: in place
