"""Catalog migrations on SQLite and PostgreSQL: a fresh database reaches the head, a
database made by the code before migrations is recognised (not recreated) and upgraded
with its data, and the head schema is what ``tables.py`` declares."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, inspect, text
from sqlalchemy.exc import IntegrityError

from streamshield.catalog import migrations
from streamshield.catalog import tables as t
from streamshield.catalog.database import open_engine, transaction
from streamshield.catalog.security import SecurityCatalog
from streamshield.catalog.store import SqlCatalog
from streamshield.policy.encoding import RoleCodec
from streamshield.policy.roles import RoleHierarchy
from tests.db import legacy_schema

OLD_ROLES = [f"R{i:02d}" for i in range(70)] + ["ADMIN", "b_lower"]  # 72 roles: 2 words


def test_head_constant_is_the_newest_revision() -> None:
    scripts = ScriptDirectory.from_config(migrations.config())
    assert scripts.get_current_head() == migrations.HEAD


@pytest.mark.filterwarnings("ignore:.*expression-based index")
def test_a_fresh_database_reaches_the_head_and_matches_tables_py(db_target) -> None:
    catalog = SqlCatalog(db_target)
    with transaction(catalog.engine) as db:
        assert migrations.current(db) == migrations.HEAD
        context = MigrationContext.configure(db)
        diff = [d for d in compare_metadata(context, t.metadata) if not _index_noise(d)]
        assert diff == []
    SqlCatalog(db_target)  # reopening is a no-op


def _index_noise(difference: object) -> bool:
    """Expression indexes (lower(name)) are not reflected alike on both back ends."""
    return isinstance(difference, tuple) and difference[0] in ("add_index", "remove_index")


def _legacy_database(target: str | Path | Engine) -> Engine:
    """A catalog as the old code made it, with users, roles, sessions and audit."""
    engine = open_engine(target)
    with transaction(engine, write=True) as db:
        legacy_schema.create_schema(db)
        db.execute(legacy_schema.roles.insert(), [{"name": r} for r in OLD_ROLES])
        db.execute(legacy_schema.role_juniors.insert().values(senior="ADMIN", junior="R00"))
        db.execute(
            legacy_schema.users.insert().values(name="joe", password_hash="h", created_at=1.0)
        )
        db.execute(legacy_schema.user_roles.insert().values(user_name="joe", role="ADMIN"))
        db.execute(
            legacy_schema.audit.insert().values(
                at=1.0, actor="joe", event="login", outcome="ok", detail="{}"
            )
        )
    return engine


def test_an_old_database_is_stamped_and_upgraded_with_its_data(db_target) -> None:
    engine = _legacy_database(db_target)
    old_hierarchy = RoleHierarchy.build(OLD_ROLES, [("ADMIN", "R00")])  # sorted, just enough
    old_codec = RoleCodec(old_hierarchy)
    catalog = SecurityCatalog(engine)
    with transaction(engine) as db:
        assert migrations.current(db) == migrations.HEAD
        positions = dict(db.execute(text("SELECT name, position FROM roles")).all())
        users = db.execute(text("SELECT name, password_hash, disabled FROM users")).all()
        assert db.scalar(text("SELECT count(*) FROM audit")) == 1
    # every role keeps the bit it had (Python's sort order: upper case before lower case)
    assert positions == {role: i for i, role in enumerate(sorted(OLD_ROLES))}
    assert [tuple(u) for u in users] == [("joe", "h", False)]
    hierarchy = catalog.catalog.hierarchy()
    assert hierarchy == old_hierarchy and hierarchy.roles == old_hierarchy.roles
    assert hierarchy.capacity == 128 and RoleCodec(hierarchy).width == old_codec.width
    assert catalog.user_roles("joe") == {"ADMIN"}
    # the audit log is still append-only after the upgrade
    with pytest.raises(Exception, match="append-only"), transaction(engine, write=True) as db:
        db.execute(text("DELETE FROM audit"))


def test_a_partial_schema_is_not_touched(db_target) -> None:
    engine = open_engine(db_target)
    with transaction(engine, write=True) as db:
        legacy_schema.users.create(db)
    with pytest.raises(migrations.UnrecognisedSchema, match="lacks"):
        SqlCatalog(engine)
    with transaction(engine) as db:
        assert "alembic_version" not in inspect(db).get_table_names()


@pytest.mark.filterwarnings("ignore:.*expression-based index")
def test_downgrade_to_the_first_revision_and_back(db_target) -> None:
    catalog = SqlCatalog(db_target)
    catalog.set_roles(["B", "A"], [("B", "A")])
    with transaction(catalog.engine, write=True) as db:
        migrations.command.downgrade(migrations.config(db), migrations.INITIAL)
        assert "position" not in {c["name"] for c in inspect(db).get_columns("roles")}
    reopened = SecurityCatalog(catalog.engine)
    assert reopened.catalog.hierarchy().roles == ("A", "B")
    reopened.create_user("ann", "a long enough password", ["A"])
    with pytest.raises(IntegrityError), transaction(catalog.engine, write=True) as db:
        # the case-blind unique index survived the round trip (SQLite rebuilds tables)
        db.execute(t.users.insert().values(name="ANN", password_hash="h", created_at=0.0))


def test_processes_opening_a_new_database_at_once_migrate_it_once(db_target) -> None:
    import threading

    engine = open_engine(db_target)
    errors: list[BaseException] = []

    def open_it() -> None:
        try:
            SqlCatalog(engine)
        except BaseException as err:  # collected: the test asserts there is none
            errors.append(err)

    threads = [threading.Thread(target=open_it) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    with transaction(engine) as db:
        assert db.scalar(text("SELECT count(*) FROM alembic_version")) == 1
        assert migrations.current(db) == migrations.HEAD
