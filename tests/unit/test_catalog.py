"""The catalog: stream definitions, the SQLite store, persistence, and the hospital catalog."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamshield.catalog import (
    Catalog,
    SqliteCatalog,
    StreamDefinition,
    StreamExists,
    UnknownStreamError,
)
from streamshield.examples import hospital
from streamshield.examples.hospital_catalog import hospital_catalog, junior_edges
from streamshield.lang.cql import CqlError, parse_policy
from streamshield.policy.elements import Channel
from streamshield.policy.policy import Combine, ServerPolicy
from streamshield.policy.roles import RoleCycleError, RoleHierarchy, UnknownRoleError

VITALS = StreamDefinition(
    "Vitals",
    (("id", "bigint"), ("pulse", "double"), ("note", "string"), ("at", "timestamp")),
    tid="id",
    event_time="at",
)
POLICY = "INSERT SP INTO STREAM Vitals LET DDP = TUPLES: *, SRP = rbac:E"


@pytest.fixture
def catalog(tmp_path: Path) -> SqliteCatalog:
    return SqliteCatalog(tmp_path / "catalog.db")


# --- stream definitions -----------------------------------------------------------------


def test_definition_names_and_ddl() -> None:
    assert VITALS.names == ("id", "pulse", "note", "at")
    assert VITALS.ddl == "`id` bigint, `pulse` double, `note` string, `at` timestamp"


def test_definition_normalises_type_names_and_accepts_lists() -> None:
    definition = StreamDefinition("S", [["a", "BIGINT"], ("b", "Int")], tid="a")  # type: ignore[arg-type]
    assert definition.attributes == (("a", "bigint"), ("b", "int"))
    assert definition.ddl == "`a` bigint, `b` int"


@pytest.mark.parametrize(
    "spark_type", ["bigint", "int", "double", "string", "boolean", "timestamp"]
)
def test_every_allowed_type(spark_type: str) -> None:
    assert StreamDefinition("S", (("id", "string"), ("x", spark_type)), tid="id").names


@pytest.mark.parametrize("spark_type", ["float", "decimal(10,2)", "map<string,int>", "binary", ""])
def test_other_types_are_rejected(spark_type: str) -> None:
    with pytest.raises(ValueError, match="type"):
        StreamDefinition("S", (("id", "bigint"), ("x", spark_type)), tid="id")


@pytest.mark.parametrize("name", ["1abc", "a-b", "a b", "a`b", "", "a.b", "ä"])
def test_bad_attribute_names_are_rejected(name: str) -> None:
    with pytest.raises(ValueError, match="attribute name"):
        StreamDefinition("S", (("id", "bigint"), (name, "int")), tid="id")


@pytest.mark.parametrize("name", ["1abc", "a/b", "..", "a b", ""])
def test_bad_stream_names_are_rejected(name: str) -> None:
    with pytest.raises(ValueError, match="stream name"):
        StreamDefinition(name, (("id", "bigint"),), tid="id")


def test_stream_names_must_not_start_with_underscore() -> None:
    """``_tmp`` is the landing zone's staging directory and Spark skips ``_`` paths."""
    with pytest.raises(ValueError, match="must not start"):
        StreamDefinition("_tmp", (("id", "bigint"),), tid="id")


@pytest.mark.parametrize("second", ["id", "ID"])
def test_duplicate_attributes_are_rejected_ignoring_case(second: str) -> None:
    with pytest.raises(ValueError, match="duplicate"):
        StreamDefinition("S", (("id", "bigint"), (second, "int")), tid="id")


@pytest.mark.parametrize("name", ["_ss_readers", "_SS_level"])
def test_label_prefix_is_reserved(name: str) -> None:
    with pytest.raises(ValueError, match="reserved"):
        StreamDefinition("S", (("id", "bigint"), (name, "bigint")), tid="id")


def test_tid_must_be_an_attribute() -> None:
    with pytest.raises(ValueError, match="tid"):
        StreamDefinition("S", (("id", "bigint"),), tid="patient")


@pytest.mark.parametrize("event_time", ["x", "missing", "s"])
def test_event_time_must_be_a_timestamp_or_bigint_attribute(event_time: str) -> None:
    attributes = (("id", "bigint"), ("x", "double"), ("s", "string"), ("t", "timestamp"))
    with pytest.raises(ValueError, match="event_time"):
        StreamDefinition("S", attributes, tid="id", event_time=event_time)
    assert StreamDefinition("S", attributes, tid="id", event_time="t").event_time == "t"
    assert StreamDefinition("S", attributes, tid="id", event_time="id").event_time == "id"


# --- streams in the store ---------------------------------------------------------------


def test_sqlite_catalog_is_a_catalog(catalog: SqliteCatalog) -> None:
    assert isinstance(catalog, Catalog)


def test_register_and_read_streams(catalog: SqliteCatalog) -> None:
    other = StreamDefinition("Alpha", (("k", "string"), ("ok", "boolean")), tid="k")
    catalog.register_stream(VITALS)
    catalog.register_stream(other)
    assert catalog.stream("Vitals") == VITALS
    assert catalog.streams() == [other, VITALS]  # sorted by name


@pytest.mark.parametrize("name", ["Vitals", "vitals", "VITALS"])
def test_duplicate_stream_names_are_refused_ignoring_case(
    catalog: SqliteCatalog, name: str
) -> None:
    catalog.register_stream(VITALS)
    with pytest.raises(StreamExists):
        catalog.register_stream(StreamDefinition(name, (("id", "bigint"),), tid="id"))
    assert catalog.streams() == [VITALS]


def test_unknown_stream(catalog: SqliteCatalog) -> None:
    catalog.register_stream(VITALS)
    with pytest.raises(UnknownStreamError):
        catalog.stream("Nope")
    with pytest.raises(UnknownStreamError):
        catalog.stream("vitals")  # lookups are exact, only uniqueness ignores case


# --- roles -------------------------------------------------------------------------------


def test_empty_hierarchy_when_no_roles_set(catalog: SqliteCatalog) -> None:
    assert catalog.hierarchy() == RoleHierarchy({})


def test_set_roles_round_trip_and_replace(catalog: SqliteCatalog) -> None:
    catalog.set_roles(["E", "D", "C"], [("D", "E"), ("C", "D")])
    assert catalog.hierarchy() == RoleHierarchy.build(["E", "D", "C"], [("D", "E"), ("C", "D")])
    catalog.set_roles(["X"], [])
    assert catalog.hierarchy().roles == ("X",)


@pytest.mark.parametrize(
    ("roles", "edges", "error"),
    [
        (["A"], [("A", "B")], UnknownRoleError),
        (["A", "B"], [("A", "B"), ("B", "A")], RoleCycleError),
        (["A", ""], [], ValueError),
    ],
)
def test_invalid_hierarchies_change_nothing(
    catalog: SqliteCatalog, roles: list[str], edges: list[tuple[str, str]], error: type
) -> None:
    catalog.set_roles(["E"], [])
    with pytest.raises(error):
        catalog.set_roles(roles, edges)
    assert catalog.hierarchy().roles == ("E",)


# --- server policies ----------------------------------------------------------------------


@pytest.fixture
def vitals_catalog(catalog: SqliteCatalog) -> SqliteCatalog:
    catalog.register_stream(VITALS)
    catalog.set_roles(["E", "D"], [("D", "E")])
    return catalog


@pytest.mark.parametrize("mode", list(Combine))
def test_server_policy_round_trip(vitals_catalog: SqliteCatalog, mode: Combine) -> None:
    vitals_catalog.set_server_policy("Vitals", POLICY, mode)
    expected = ServerPolicy(parse_policy(POLICY, ts=1).sps, mode)
    assert vitals_catalog.server_policies() == {"Vitals": expected}


def test_server_policy_is_replaced(vitals_catalog: SqliteCatalog) -> None:
    vitals_catalog.set_server_policy("Vitals", POLICY, Combine.INTERSECT)
    narrower = POLICY.replace("rbac:E", "rbac:D")
    vitals_catalog.set_server_policy("Vitals", narrower, Combine.UNION)
    assert vitals_catalog.server_policies() == {
        "Vitals": ServerPolicy(parse_policy(narrower, ts=1).sps, Combine.UNION)
    }


def test_no_server_policies_by_default(vitals_catalog: SqliteCatalog) -> None:
    assert vitals_catalog.server_policies() == {}


def test_server_policy_for_unknown_stream(vitals_catalog: SqliteCatalog) -> None:
    with pytest.raises(UnknownStreamError):
        vitals_catalog.set_server_policy("Nope", POLICY.replace("Vitals", "Nope"), Combine.UNION)


def test_server_policy_must_parse(vitals_catalog: SqliteCatalog) -> None:
    with pytest.raises(CqlError):
        vitals_catalog.set_server_policy("Vitals", "INSERT SP INTO Vitals", Combine.INTERSECT)
    assert vitals_catalog.server_policies() == {}


def test_server_policy_statements_must_target_the_stream(vitals_catalog: SqliteCatalog) -> None:
    with pytest.raises(ValueError, match="INTO STREAM Other"):
        vitals_catalog.set_server_policy(
            "Vitals", POLICY.replace("STREAM Vitals", "STREAM Other"), Combine.INTERSECT
        )


def test_server_policy_roles_must_exist(vitals_catalog: SqliteCatalog) -> None:
    with pytest.raises(ValueError, match="unknown roles"):
        vitals_catalog.set_server_policy(
            "Vitals", POLICY.replace("rbac:E", "rbac:{E, Ghost}"), Combine.INTERSECT
        )
    vitals_catalog.set_server_policy("Vitals", POLICY.replace("rbac:E", "rbac:G*"), Combine.UNION)


# --- landing bookkeeping ------------------------------------------------------------------


def test_seq_starts_at_minus_one_and_never_goes_back(catalog: SqliteCatalog) -> None:
    one, two = Channel("Vitals", "p1"), Channel("Vitals", "p2")
    assert catalog.last_seq(one) == -1
    catalog.advance_seq(one, 5)
    catalog.advance_seq(one, 3)
    assert catalog.last_seq(one) == 5
    catalog.advance_seq(one, 2**63 - 1)
    assert catalog.last_seq(one) == 2**63 - 1
    assert catalog.last_seq(two) == -1


def test_rejection_counts(catalog: SqliteCatalog) -> None:
    catalog.count_rejection("Vitals", "type_mismatch")
    catalog.count_rejection("Vitals", "type_mismatch", 2)
    catalog.count_rejection(None, "malformed")
    assert catalog.rejections() == {("Vitals", "type_mismatch"): 3, ("", "malformed"): 1}


def test_everything_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "catalog.db"
    first = SqliteCatalog(path)
    first.register_stream(VITALS)
    first.set_roles(["E", "D"], [("D", "E")])
    first.set_server_policy("Vitals", POLICY, Combine.UNION)
    first.advance_seq(Channel("Vitals", "p1"), 41)
    first.count_rejection(None, "malformed", 7)

    again = SqliteCatalog(path)
    assert again.streams() == [VITALS]
    assert again.hierarchy() == RoleHierarchy.build(["E", "D"], [("D", "E")])
    assert again.server_policies()["Vitals"].mode is Combine.UNION
    assert again.last_seq(Channel("Vitals", "p1")) == 41
    assert again.rejections() == {("", "malformed"): 7}


# --- the hospital example -----------------------------------------------------------------


def test_hospital_catalog(tmp_path: Path) -> None:
    catalog = hospital_catalog(tmp_path / "hospital.db")
    assert {d.name: d.attributes for d in catalog.streams()} == hospital.ATTRIBUTE_TYPES
    assert {(d.tid, d.event_time) for d in catalog.streams()} == {("patient_id", "ts")}
    assert catalog.hierarchy() == hospital.hierarchy()
    assert set(catalog.hierarchy().roles) == set(hospital.ROLE_NAMES)
    assert catalog.server_policies() == hospital.server_policies()


def test_hospital_catalog_can_be_rebuilt_on_the_same_path(tmp_path: Path) -> None:
    hospital_catalog(tmp_path / "hospital.db")
    catalog = hospital_catalog(tmp_path / "hospital.db")
    assert len(catalog.streams()) == 3
    assert catalog.server_policies() == hospital.server_policies()


def test_hospital_edges_come_from_the_example() -> None:
    assert RoleHierarchy.build(hospital.ROLE_NAMES, junior_edges()) == hospital.hierarchy()
    assert ("C", "D") in junior_edges()
