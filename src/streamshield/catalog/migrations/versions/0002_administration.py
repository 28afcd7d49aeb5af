"""Administration: stable role bit positions, a fixed role capacity, disabled users.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23

* ``roles.position``: a role's bit in every stored label. Existing roles get the
  positions they already had, the index in the *sorted* role list (the code before this
  revision derived positions by sorting; Python's sort, not the database's collation).
* ``catalog_meta.role_capacity``: the label block width in roles, a multiple of 64.
  Existing roots get exactly the width their labels already have
  (``64 * ceil(roles / 64)``, at least 64), so nothing stored changes shape.
* ``users.disabled``: a disabled user cannot log in and has no live session.
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_roles = sa.table("roles", sa.column("name", sa.String), sa.column("position", sa.Integer))
_meta = sa.table("catalog_meta", sa.column("key", sa.String), sa.column("value", sa.Text))


def upgrade() -> None:
    bind = op.get_bind()
    op.add_column("roles", sa.Column("position", sa.Integer, nullable=True))
    names = sorted(bind.scalars(sa.select(_roles.c.name)).all())
    for position, name in enumerate(names):
        bind.execute(sa.update(_roles).where(_roles.c.name == name).values(position=position))
    with op.batch_alter_table("roles") as batch:
        batch.alter_column("position", existing_type=sa.Integer, nullable=False)
        batch.create_unique_constraint("roles_position_key", ["position"])
    op.create_table(
        "catalog_meta",
        sa.Column("key", sa.String(100), primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
    )
    capacity = max(1, -(-len(names) // 64)) * 64
    bind.execute(sa.insert(_meta).values(key="role_capacity", value=json.dumps(capacity)))
    op.add_column(
        "users",
        sa.Column("disabled", sa.Boolean, nullable=False, server_default=sa.false()),
    )


def downgrade() -> None:
    with op.batch_alter_table("users") as batch:
        batch.drop_column("disabled")
    # SQLite's batch mode rebuilt the table without its expression index: put it back
    op.create_index(
        "users_name_ci", "users", [sa.text("lower(name)")], unique=True, if_not_exists=True
    )
    op.drop_table("catalog_meta")
    with op.batch_alter_table("roles") as batch:
        batch.drop_constraint("roles_position_key", type_="unique")
        batch.drop_column("position")
