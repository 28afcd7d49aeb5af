"""Chinese-Wall levels: COI and CI classes, stream, channel and session levels, clearances.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23

* ``coi_classes`` and ``companies``: a class's position is its component in every
  level, a company's position its bit in every level label; both are fixed once given
  (new ones are appended, none is removed), like role positions.
* ``ci_classes`` / ``ci_members``: complementing-interest classes (Definition 2).
* ``stream_levels``, ``channel_levels``, ``clearances`` and ``sessions.level``: levels
  stored as JSON ``{class: company or "T"}``, so adding a class keeps them valid.
* ``catalog_meta.level_capacity`` is written when the first class is defined.

Existing roots get empty tables: no stream has a level yet, so nothing changes until an
administrator defines a class.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_NAMED = ("coi_classes", "companies", "ci_classes")


def upgrade() -> None:
    op.create_table(
        "coi_classes",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("position", sa.Integer, nullable=False, unique=True),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_table(
        "companies",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("coi_class", sa.String(64), nullable=False),
        sa.Column("position", sa.Integer, nullable=False, unique=True),
    )
    op.create_table(
        "ci_classes",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    for table in _NAMED:
        op.create_index(f"{table}_name_ci", table, [sa.text("lower(name)")], unique=True)
    op.create_table(
        "ci_members",
        sa.Column("ci_class", sa.String(64), primary_key=True),
        sa.Column("company", sa.String(64), primary_key=True),
    )
    op.create_table(
        "stream_levels",
        sa.Column("stream", sa.String(200), primary_key=True),
        sa.Column("level", sa.Text, nullable=False),
    )
    op.create_table(
        "channel_levels",
        sa.Column("stream", sa.String(200), primary_key=True),
        sa.Column("provider", sa.String(200), primary_key=True),
        sa.Column("level", sa.Text, nullable=False),
    )
    op.create_table(
        "clearances",
        sa.Column("user_name", sa.String(200), primary_key=True),
        sa.Column("level", sa.Text, nullable=False),
    )
    op.add_column("sessions", sa.Column("level", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("level")
    for table in ("clearances", "channel_levels", "stream_levels", "ci_members"):
        op.drop_table(table)
    for table in _NAMED:
        op.drop_index(f"{table}_name_ci", table_name=table)
        op.drop_table(table)
    op.execute(sa.text("DELETE FROM catalog_meta WHERE key = 'level_capacity'"))
