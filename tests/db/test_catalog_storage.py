"""The engine's catalog (streams, roles, server policies, landing bookkeeping) on SQLite
and PostgreSQL: same results on both, schema creation idempotent, writers serialised."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from sqlalchemy import Engine, inspect

from streamshield.catalog import Catalog, SqlCatalog, StreamDefinition, StreamExists, migrations
from streamshield.catalog.database import transaction
from streamshield.catalog.store import UnknownStreamError
from streamshield.policy.elements import Channel
from streamshield.policy.policy import Combine
from streamshield.policy.roles import RoleCycleError, RoleHierarchy

VITALS = StreamDefinition(
    "Vitals",
    (("id", "bigint"), ("pulse", "double"), ("note", "string"), ("at", "timestamp")),
    tid="id",
    event_time="at",
)
POLICY = "INSERT SP INTO STREAM Vitals LET DDP = TUPLES: *, SRP = rbac:E"


@pytest.fixture
def catalog(db_target: str | Path | Engine) -> SqlCatalog:
    return SqlCatalog(db_target)


def test_is_a_catalog(catalog: SqlCatalog) -> None:
    assert isinstance(catalog, Catalog)


def test_streams_round_trip_and_names_are_unique_ignoring_case(catalog: SqlCatalog) -> None:
    alpha = StreamDefinition("alpha", (("k", "string"),), tid="k")
    catalog.register_stream(VITALS)
    catalog.register_stream(alpha)
    assert catalog.stream("Vitals") == VITALS
    assert catalog.streams() == [VITALS, alpha]  # binary order: upper case first
    with pytest.raises(StreamExists):
        catalog.register_stream(StreamDefinition("VITALS", (("id", "bigint"),), tid="id"))
    with pytest.raises(UnknownStreamError):
        catalog.stream("vitals")


def test_roles_and_invalid_hierarchies(catalog: SqlCatalog) -> None:
    catalog.set_roles(["E", "D", "C"], [("D", "E"), ("C", "D")])
    assert catalog.hierarchy() == RoleHierarchy.build(["E", "D", "C"], [("D", "E"), ("C", "D")])
    with pytest.raises(RoleCycleError):
        catalog.set_roles(["A", "B"], [("A", "B"), ("B", "A")])
    assert catalog.hierarchy().roles == ("C", "D", "E")


def test_server_policies(catalog: SqlCatalog) -> None:
    catalog.register_stream(VITALS)
    catalog.set_roles(["E", "D"], [("D", "E")])
    catalog.set_server_policy("Vitals", POLICY, Combine.INTERSECT)
    catalog.set_server_policy("Vitals", POLICY.replace("rbac:E", "rbac:D"), Combine.UNION)
    (policy,) = catalog.server_policies().values()
    assert policy.mode is Combine.UNION


def test_landing_bookkeeping_handles_64_bit_seqs(catalog: SqlCatalog) -> None:
    one = Channel("Vitals", "p1")
    assert catalog.last_seq(one) == -1
    catalog.advance_seq(one, 5)
    catalog.advance_seq(one, 3)
    assert catalog.last_seq(one) == 5
    catalog.advance_seq(one, 2**63 - 1)
    assert catalog.last_seq(one) == 2**63 - 1
    catalog.count_rejection("Vitals", "type_mismatch", 2)
    catalog.count_rejection("Vitals", "type_mismatch")
    catalog.count_rejection(None, "malformed")
    assert catalog.rejections() == {("Vitals", "type_mismatch"): 3, ("", "malformed"): 1}


def test_opening_again_is_idempotent_and_keeps_data(db_target: str | Path | Engine) -> None:
    first = SqlCatalog(db_target)
    first.register_stream(VITALS)
    first.advance_seq(Channel("Vitals", "p"), 7)
    again = SqlCatalog(db_target)
    assert again.streams() == [VITALS]
    assert again.last_seq(Channel("Vitals", "p")) == 7
    tables = set(inspect(again.engine).get_table_names())
    assert {"streams", "users", "grants", "sessions", "audit"} <= tables


def test_concurrent_writers_are_serialised(catalog: SqlCatalog) -> None:
    """Many threads (own connections each) count and advance at once: no update is lost
    and a name is registered once, whatever the interleaving."""
    outcomes: list[str] = []
    start = threading.Barrier(8)

    def work(i: int) -> None:
        start.wait()
        for n in range(10):
            catalog.count_rejection("S", "r")
            catalog.advance_seq(Channel("S", "p"), i * 10 + n)
        try:
            catalog.register_stream(StreamDefinition("Race", (("id", "bigint"),), tid="id"))
            outcomes.append("registered")
        except StreamExists:
            outcomes.append("exists")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert catalog.rejections() == {("S", "r"): 80}
    assert catalog.last_seq(Channel("S", "p")) == 79
    assert sorted(outcomes) == ["exists"] * 7 + ["registered"]


def test_attribute_tags_round_trip_and_old_rows_have_none(catalog: SqlCatalog) -> None:
    tagged = VITALS.retagged({"note": ["phi"], "pulse": ["PHI", "vital"]})
    catalog.register_stream(tagged)
    assert catalog.stream("Vitals") == tagged
    assert catalog.stream("Vitals").tags_of == {
        "note": frozenset({"PHI"}),
        "pulse": frozenset({"PHI", "VITAL"}),
    }
    # a row written before tags existed (the column dropped and added back) has none
    with transaction(catalog.engine, write=True) as db:
        migrations.command.downgrade(migrations.config(db), "0005")
        migrations.upgrade(db)
    assert catalog.stream("Vitals") == VITALS and catalog.stream("Vitals").tags == ()


def test_glob_scoped_server_policies_cover_streams_added_later(catalog: SqlCatalog) -> None:
    catalog.set_roles(["E", "D"], [("D", "E")])
    tagged = "INSERT SP INTO STREAM LET DDP = ATTRIBUTES: TAGGED PHI, SRP = rbac:D"
    catalog.set_server_policy("ward*", tagged, Combine.UNION)  # no ward stream exists yet
    catalog.register_stream(VITALS)
    assert list(catalog.server_policies()) == ["ward*"]
    with pytest.raises(ValueError, match="INTO STREAM Vitals"):
        catalog.set_server_policy("ward*", POLICY, Combine.UNION)
    with pytest.raises(UnknownStreamError):
        catalog.set_server_policy("ward_a", tagged.replace("LET", "ward_a LET"), Combine.UNION)
    catalog.register_stream(StreamDefinition("ward_a", (("id", "bigint"),), tid="id"))
    with pytest.raises(ValueError, match="one mode per stream"):
        catalog.set_server_policy("*", tagged, Combine.INTERSECT)
    catalog.set_server_policy("*", tagged, Combine.UNION)
    assert sorted(catalog.server_policies()) == ["*", "ward*"]
    catalog.set_server_policy("*_b", tagged, Combine.INTERSECT)  # takes in no stream yet
    with pytest.raises(ValueError, match="both modes"):
        catalog.register_stream(StreamDefinition("ward_b", (("id", "bigint"),), tid="id"))
    with pytest.raises(UnknownStreamError):
        catalog.stream("ward_b")
