"""A query's Chinese-Wall level, pure (paper 2, sections 3-4): what it reads, how
the level travels through admission and rewrites, what explain shows, and the refusals
of a provider or a query that tries to set or name the level."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamshield.catalog import SqliteCatalog, StreamDefinition
from streamshield.landing import LandingZone, Reason
from streamshield.lang.admission import admit
from streamshield.lang.label_propagation import combined
from streamshield.lang.output_level import OutputLevel
from streamshield.lang.query_check import QueryRejected, check_level_name, check_query
from streamshield.lang.rewrite_rules import Rewrite, secure
from streamshield.lang.secured_plan import secured_plan
from streamshield.lang.wire import ReservedFieldError, parse_element, to_dict
from streamshield.policy.elements import Channel, TupleElement
from streamshield.policy.lattice import Lattice
from streamshield.policy.query_level import QueryLevel
from streamshield.policy.roles import RoleHierarchy
from streamshield.server.query_store import QueryStore, StoredQuery
from streamshield.server.security_port import stored_query_level
from tests.conformance.levels import case_id, cases, lattice

CLOUD = Lattice.of({"COI1": ["1", "2"], "COI2": ["A", "B", "C"]})
LEVELS = st.tuples(st.sampled_from(["_", "1", "2", "T"]), st.sampled_from(["_", "A", "B", "T"]))
LOG = StreamDefinition("MessageLog", (("id", "bigint"), ("msgType", "string")), "id")
SMOKE = StreamDefinition("Smoke", (("id", "bigint"), ("level", "bigint")), "id")


def at(text: str) -> QueryLevel:
    return QueryLevel(CLOUD, CLOUD.parse(text))


@pytest.mark.parametrize("case", cases("a", "b"), ids=case_id)
def test_reads_is_dominance_on_the_table(case) -> None:
    lat = lattice(case["lattice"])
    a, b = lat.parse(case["a"]), lat.parse(case["b"])
    assert QueryLevel(lat, b).reads(lat.encode(a)) is case["a_dominated_by_b"]


@given(LEVELS, LEVELS, LEVELS)
def test_the_lub_of_readable_levels_is_readable(a, b, c) -> None:
    """Why the output assertion can never fire: C reads a and b, so it reads a OR b."""
    query = QueryLevel(CLOUD, CLOUD.level(*c))
    wa, wb = CLOUD.encode(CLOUD.level(*a)), CLOUD.encode(CLOUD.level(*b))
    if query.reads(wa) and query.reads(wb):
        assert query.reads(CLOUD.lub_words(wa, wb))


def test_no_level_and_the_wrong_width_read_nothing() -> None:
    top = at("[T, T]")
    assert not top.reads(None)
    assert not top.reads((0, 0))
    with pytest.raises(Exception, match="component"):
        QueryLevel(CLOUD, Lattice.of({"X": ["x", "y"]}).public)


def test_the_conjunct_text_is_the_engines_test_word_by_word() -> None:
    assert at("[1, _]").conjunct_sql() == "coalesce((`_ss_lvl_0` & -2) = 0, false)"
    assert at("[T, T]").conjunct_sql() == "coalesce((`_ss_lvl_0` & -32) = 0, false)"


def test_an_aggregate_level_is_one_bit_or_per_word_a_missing_word_counting_as_top() -> None:
    """The form of ``Lattice.lub_group``: a NULL contributor makes the word -1, which
    holds a bit no company of the cloud lattice has, so nothing dominates the group."""
    sql = combined("_ss_lvl_0", "_ss_r", at("[1, B]")).sql(dialect="spark")
    assert sql == "BIT_OR(COALESCE(_ss_lvl_0, -1))"
    assert combined("_ss_src_0", "_ss_r", at("[1, B]")).sql(dialect="spark") == "BIT_OR(_ss_src_0)"
    assert not at("[T, T]").reads(CLOUD.unknown)
    # two words: a NULL in either marks both (the mark denies through the word with a
    # spare bit, whichever holds the NULL)
    wide = Lattice.of({"X": [f"x{i}" for i in range(70)], "Y": ["a", "b"]})
    sql = combined("_ss_lvl_0", "_ss_r", QueryLevel(wide, wide.trusted)).sql(dialect="spark")
    assert sql == (
        "BIT_OR(CASE WHEN _ss_lvl_0 IS NULL OR _ss_lvl_1 IS NULL THEN -1 ELSE _ss_lvl_0 END)"
    )


def test_without_a_spare_bit_or_a_level_the_aggregate_keeps_the_null_guard() -> None:
    """Every bit a company's: -1 would read as trusted, so a NULL contributor makes the
    group's word NULL (readable by no level), as it did before the one-aggregate form."""
    guard = "CASE WHEN COUNT(1) = COUNT(_ss_lvl_0) THEN BIT_OR(_ss_lvl_0) END"
    full = Lattice.of({"X": [f"x{i}" for i in range(32)], "Y": [f"y{i}" for i in range(32)]})
    assert combined("_ss_lvl_0", "_ss_r", QueryLevel(full, full.trusted)).sql("spark") == guard
    assert combined("_ss_lvl_0", "_ss_r").sql(dialect="spark") == guard


def test_admission_carries_the_level_to_the_rewrites() -> None:
    hierarchy = RoleHierarchy.build(["AUD"])
    admitted = admit("SELECT id FROM MessageLog", ["AUD"], hierarchy, ["MessageLog"], at("[1, B]"))
    assert admitted.level == at("[1, B]")
    rewrite = Rewrite(
        ("MessageLog",),
        {"MessageLog": "v"},
        {"MessageLog": LOG.names},
        ("_ss_r0_0", "_ss_d0_0", *at("[1, B]").columns),
    )
    sql = secure(admitted.checked.tree, rewrite).sql
    assert "_ss_lvl_0" in sql  # carried on as a label of every output row


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT id, level FROM MessageLog",
        "SELECT id AS level FROM MessageLog",
        "SELECT count(*) AS Level FROM MessageLog",
        "SELECT id FROM MessageLog WHERE `level` > 0",
    ],
)
def test_a_query_may_not_name_or_compute_a_level(sql) -> None:
    tree = check_query(sql, ["MessageLog"]).tree
    with pytest.raises(QueryRejected, match=r"^query rejected \(reserved_name\): level:"):
        check_level_name(tree, LOG.names)


def test_the_level_words_are_reserved_names_too() -> None:
    with pytest.raises(QueryRejected) as refused:
        check_query("SELECT id, _ss_lvl_0 FROM MessageLog", ["MessageLog"])
    assert refused.value.rule == "reserved_name"


def test_an_attribute_called_level_stays_readable() -> None:
    tree = check_query("SELECT id, level FROM Smoke", ["Smoke"]).tree
    check_level_name(tree, SMOKE.names)  # no error: it is the stream's own attribute


def test_explain_shows_the_level_conjunct_beneath_the_query() -> None:
    plan = secured_plan(["AUD"], at("[1, _]"), OutputLevel.ROW)
    assert plan.level == "[1, ⊥]"
    assert plan.conjuncts[0] == "tuple_label_allows(roles: AUD)"
    assert plan.conjuncts[1].startswith("coalesce((`_ss_lvl_0` & -2) = 0, false)")
    assert plan.conjuncts[1].endswith("/* level(t) dominated by [1, ⊥] */")
    assert "level: each row at its own tuple's level, dominated by [1, ⊥]" in plan.labels[1]
    counted = secured_plan(["AUD"], at("[1, _]"), OutputLevel.QUERY)
    assert counted.labels[1].startswith("level: every row at [1, ⊥] (write-equal)")
    off = secured_plan(["AUD"], None)
    assert off.level is None and len(off.conjuncts) == 1
    assert not any("_ss_lvl" in line for line in (*off.conjuncts, *off.labels))


# -- providers never set a level ----------------------------------------------------------


def _tuple(**values) -> TupleElement:
    return TupleElement(Channel("MessageLog", "company1"), 1, 1, 10, 1, {"id": 1, **values})


@pytest.mark.parametrize("field", ["level", "_ss_lvl_0", "Level"])
def test_the_wire_refuses_a_top_level_level_field_by_name(field) -> None:
    line = json.dumps({**to_dict(_tuple()), field: 3})
    with pytest.raises(ReservedFieldError, match=f"^{field}: a tuple's security level"):
        parse_element(line)


@pytest.fixture
def zone(tmp_path: Path) -> LandingZone:
    catalog = SqliteCatalog(tmp_path / "catalog.db")
    catalog.register_stream(LOG)
    catalog.register_stream(SMOKE)
    catalog.set_roles(["AUD"], [])
    return LandingZone(tmp_path / "land", catalog)


def test_the_landing_zone_refuses_level_fields_naming_them_and_keeps_the_rest(zone) -> None:
    secret = "company-one-secret"
    lines = [
        json.dumps({**to_dict(_tuple(msgType=secret)), "level": "[T, T]"}),
        json.dumps(to_dict(_tuple(level=5, msgType=secret))),
        json.dumps(to_dict(_tuple(_ss_lvl_0=31))),
        json.dumps({**to_dict(_tuple(msgType="ok")), "seq": 2}),
    ]
    result = zone.append_lines(lines)
    assert result.accepted == 1  # what was fine is landed, nothing of the refused lines
    refused = [(r.line, r.reason, r.message.split(":")[0]) for r in result.rejected]
    assert refused == [
        (1, Reason.RESERVED_FIELD, "level"),
        (2, Reason.RESERVED_FIELD, "values.level"),
        (3, Reason.RESERVED_FIELD, "values._ss_lvl_0"),
    ]
    assert all(secret not in r.message and "31" not in r.message for r in result.rejected)


def test_a_stream_with_a_level_attribute_still_lands_it(zone) -> None:
    element = TupleElement(Channel("Smoke", "s1"), 1, 1, 10, 1, {"id": 1, "level": 3})
    assert zone.append([element]).accepted == 1


# -- a query keeps its level across restarts -----------------------------------------------


class _Catalog:
    """The one answer ``stored_query_level`` needs from the security catalog."""

    def __init__(self, lattice: Lattice | None) -> None:
        self._lattice = lattice

    def lattice(self) -> Lattice | None:
        return self._lattice


def test_a_stored_query_keeps_its_level_and_one_without_runs_at_public(tmp_path: Path) -> None:
    store = QueryStore(tmp_path)
    store.save(StoredQuery("q", "SELECT id FROM MessageLog", "q_out", "api_1", "[1, ⊥]"))
    (tmp_path / "old.json").write_text(
        json.dumps({"name": "old", "text": "SELECT 1", "output": "o", "internal": "api_2"})
    )
    loaded, old = store.load("q"), store.load("old")
    assert loaded is not None and loaded.level == "[1, ⊥]"
    assert old is not None and old.level is None
    catalog = _Catalog(CLOUD)
    assert stored_query_level(catalog, loaded.level) == at("[1, _]")
    assert stored_query_level(catalog, None) == at("[_, _]")  # never above public
    assert stored_query_level(catalog, "[1, Z]") == at("[_, _]")  # unknown company
    assert stored_query_level(_Catalog(None), "[1, ⊥]") is None  # levels off
    (tmp_path / "bad.json").write_text(
        json.dumps({"name": "bad", "text": "x", "output": "o", "internal": "i", "level": 3})
    )
    assert store.load("bad") is None  # a damaged definition is not a guess


def test_a_row_level_selection_copies_its_words_and_an_aggregate_is_stamped() -> None:
    """A row keeps its tuple's level only where the rewrite copies the secured view's
    words into it (a column, no OR), words its view's conjunct has just tested: the
    premise of ``OutputLevel.ROW``. An aggregate's words are the query's level, stamped
    by the engine (``engine.views.level_columns.at_output_level``) over whatever the rewrite
    computes."""
    hierarchy = RoleHierarchy.build(["AUD"])
    labels = ("_ss_r0_0", "_ss_d0_0", *at("[1, B]").columns)
    for sql, output in (
        ("SELECT id FROM MessageLog", OutputLevel.ROW),
        ("SELECT m FROM (SELECT id AS m FROM MessageLog WHERE id > 1) t", OutputLevel.ROW),
        ("SELECT count(*) FROM MessageLog", OutputLevel.QUERY),
    ):
        admitted = admit(sql, ["AUD"], hierarchy, ["MessageLog"], at("[1, B]"))
        assert admitted.output_level is output, sql
        rewrite = Rewrite(
            ("MessageLog",),
            {"MessageLog": "v"},
            {"MessageLog": LOG.names},
            labels,
            level=at("[1, B]"),
        )
        text = secure(admitted.checked.tree, rewrite).sql
        copied = output is OutputLevel.ROW
        assert ("BIT_OR(COALESCE(_ss_lvl_0, -1))" in text) is not copied, text
        assert "_ss_lvl_0" in text, text
