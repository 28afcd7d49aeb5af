"""A definition file and its catalog record: staged first, promoted after, so a crash
in between never leaves a record without its definition (found by bench/crash.py at the
catalog.schema and catalog.query crash points)."""

from __future__ import annotations

from streamshield.durable import pending, promote
from streamshield.server.query_store import QueryStore, StoredQuery
from streamshield.server.schemas import SchemaDef, SchemaStore

SCHEMA = SchemaDef("t", (("id", "bigint"),), "id")
QUERY = StoredQuery("q", "SELECT id FROM s", "q_out", "api_0123456789ab")


def test_a_staged_schema_is_promoted_when_its_record_asks_for_it(tmp_path) -> None:
    store = SchemaStore(tmp_path)
    store.stage(SCHEMA)  # the process died after the catalog recorded the schema
    assert not (tmp_path / "t.json").exists()
    assert SchemaStore(tmp_path).load("t") == SCHEMA
    assert (tmp_path / "t.json").is_file() and not pending(tmp_path / "t.json").exists()


def test_a_refused_schema_leaves_nothing_and_never_touches_an_existing_one(tmp_path) -> None:
    store = SchemaStore(tmp_path)
    store.save(SCHEMA)
    other = SchemaDef("t", (("id", "bigint"), ("x", "string")), "id")
    store.stage(other)  # a second "t": the catalog refuses the taken name
    store.discard("t")
    assert store.load("t") == SCHEMA
    assert not pending(tmp_path / "t.json").exists()


def test_a_staged_query_is_promoted_and_removal_takes_both(tmp_path) -> None:
    store = QueryStore(tmp_path)
    store.stage(QUERY)
    assert store.load("q") == QUERY  # restore_queries after a crash at catalog.query
    store.stage(QUERY)
    store.remove("q")
    assert store.load("q") is None
    assert list(tmp_path.iterdir()) == []


def test_promote_without_a_staged_file_changes_nothing(tmp_path) -> None:
    assert promote(tmp_path / "x.json") is False
    assert list(tmp_path.iterdir()) == []
