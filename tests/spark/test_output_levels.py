"""No input a user chooses makes a query fail, and a query writes at its level.

Empty (a WHERE no tuple meets), all-denied (every tuple filtered by the secured view:
a role no sp grants) and all-NULL (an attribute NULL in every tuple) inputs, for every
aggregate shape the engine runs: global and grouped aggregates (as shared-network
branches and as queries of their own), tumbling ``window()`` and sliding ``[RANGE t
SLIDE s]`` aggregates, ``[ROWS n]`` and ``[RANGE t]`` windows, aggregates over joins and
statistics-only aggregates, at a level and without one. An aggregate's rows, an empty
group's included, are at the query's level ``C`` (paper 2's write-equal rule; its LUB
over no rows would be NULL); a stateless selection's keep their tuples' own levels
(``lang.output_level``; docs/chinese-wall.md, "Output levels").

The paper's cloud-auditing lattice, COI1 = {1, 2}, COI2 = {A, B, C}; one landing and one
ingest for the module, each query its own micro-batch run (``processAllAvailable``).
"""

from __future__ import annotations

import pytest

from streamshield.catalog import SqliteCatalog, StreamDefinition
from streamshield.engine.delivery.delivery import Delivery
from streamshield.engine.pipeline import Pipeline
from streamshield.engine.queries.streaming_queries import CallbackSink, MemorySink
from streamshield.lang.cql import parse_policy
from streamshield.policy.elements import Channel, SpElement, TupleElement
from streamshield.policy.lattice import Lattice
from streamshield.policy.level_assignment import LevelAssignment
from streamshield.policy.query_level import QueryLevel
from tests.conftest import long_mode

pytestmark = pytest.mark.spark

CLOUD = Lattice.of({"COI1": ["1", "2"], "COI2": ["A", "B", "C"]})
LOG = "Log"
ASSIGNMENT = LevelAssignment(
    CLOUD,
    streams={LOG: CLOUD.parse("[T, T]")},
    channels={
        (LOG, "company1"): CLOUD.parse("[1, _]"),
        (LOG, "company2"): CLOUD.parse("[2, _]"),
        (LOG, "companyB"): CLOUD.parse("[_, B]"),
    },
)
ONE = QueryLevel(CLOUD, CLOUD.parse("[1, _]"))
TOP = QueryLevel(CLOUD, CLOUD.parse("[T, T]"))
# AUD reads every tuple; STAT reads v only for statistics; NOBODY is granted nothing.
ROLES = ["AUD", "STAT", "NOBODY"]
POLICY = (
    f"INSERT SP INTO STREAM {LOG} LET DDP = STREAMS: {LOG}, SRP = rbac:AUD;"
    f"INSERT SP INTO STREAM {LOG} LET DDP = ATTRIBUTES: {{id, svc, ts}}, SRP = rbac:STAT;"
    f"INSERT SP INTO STREAM {LOG} LET DDP = ATTRIBUTES: v, SRP = rbac:STAT FOR STATISTICS"
)
# provider -> (id, svc, v); company1's "null" tuples have v NULL, as every tuple of
# [1, ⊥] does: at [1, ⊥] an aggregate of v reads only NULLs.
TUPLES = {
    "company1": [(1, "null", None), (2, "null", None), (3, "five", None)],
    "company2": [(11, "five", 7), (12, "null", 8)],
    "companyB": [(21, "five", 9)],
}


def elements() -> list:
    policy = parse_policy(POLICY, ts=100)
    out: list = []
    for provider, rows in TUPLES.items():
        channel = Channel(LOG, provider)
        out += [SpElement(channel, sp.sn, sp) for sp in policy.sps]
        for seq, (tid, svc, v) in enumerate(rows, start=len(policy.sps) + 1):
            values = {"id": tid, "svc": svc, "v": v, "ts": 1_000 + tid}
            out.append(TupleElement(channel, seq, tid, 100, policy.csn, values))
    return out


@pytest.fixture(scope="module")
def pipeline(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("output_levels")
    catalog = SqliteCatalog(root / "catalog.db")
    attributes = (("id", "bigint"), ("svc", "string"), ("v", "bigint"), ("ts", "bigint"))
    catalog.register_stream(StreamDefinition(LOG, attributes, "id", "ts"))
    catalog.set_roles(ROLES, [])
    pipeline = Pipeline(spark, catalog, root, levels=lambda: ASSIGNMENT)
    assert not pipeline.landing.append(elements()).rejected
    pipeline.ingest_available()
    yield pipeline
    for query in list(pipeline.queries.list()):
        pipeline.cql.stop(query.name)


class Collect:
    def __init__(self) -> None:
        self.rows: list[dict] = []

    def __call__(self, frame, _batch_id) -> None:
        self.rows += [r.asDict() for r in frame.collect()]


def run(pipeline, text: str, role: str, level: QueryLevel | None) -> list[dict]:
    """The rows of ``text`` run by ``role`` at ``level``; a failed query raises."""
    rows = Collect()
    query = pipeline.cql.submit(pipeline.cql.admit(text, [role], level), CallbackSink(rows))
    try:
        query.process_all_available()
        assert query.error() is None
    finally:
        pipeline.cql.stop(query.name)
    return rows.rows


# Each shape's text; {where} is the input's condition.
SHAPES = {
    "global": "SELECT count(*) AS n, sum(v) AS s, min(v) AS lo, avg(v) AS a FROM Log {where}",
    "grouped": "SELECT svc, count(*) AS n, max(v) AS hi FROM Log {where} GROUP BY svc",
    "tumbling": (
        "SELECT window(timestamp_seconds(ts), '10 seconds') AS w, count(*) AS n, sum(v) AS s "
        "FROM Log {where} GROUP BY window(timestamp_seconds(ts), '10 seconds')"
    ),
    "sliding": "SELECT count(*) AS n, sum(v) AS s FROM Log [RANGE 60 SLIDE 30] {where}",
    "rows": "SELECT count(*) AS n, max(v) AS hi, avg(v) AS a FROM Log [ROWS 5] {where}",
    "range": "SELECT count(*) AS n, min(v) AS lo FROM Log [RANGE 60 SECONDS] {where}",
    "join": (
        "SELECT count(*) AS n, sum(a.v) AS s FROM Log [ROWS 10] a JOIN Log [ROWS 10] b "
        "ON a.id = b.id {where}"
    ),
}
# input -> (role, condition): the empty input meets no tuple; the all-denied one is
# read by a role no sp grants; the all-NULL one reads v, NULL in every tuple at [1, ⊥].
INPUTS = {
    "empty": ("AUD", "WHERE svc = 'none'"),
    "denied": ("NOBODY", ""),
    "null": ("AUD", "WHERE svc = 'null'"),
}
QUICK = {
    ("global", "empty"),
    ("global", "denied"),
    ("global", "null"),
    ("sliding", "empty"),
    ("rows", "denied"),
    ("range", "null"),
    ("join", "empty"),
}
CASES = [
    pytest.param(
        shape,
        kind,
        marks=() if (shape, kind) in QUICK else pytest.mark.long,
        id=f"{shape}-{kind}",
    )
    for shape in SHAPES
    for kind in INPUTS
]


def _where(shape: str, condition: str) -> str:
    return condition.replace("svc", "a.svc") if shape == "join" else condition


@pytest.mark.parametrize(("shape", "kind"), CASES)
def test_no_input_fails_an_aggregate_and_its_rows_are_at_the_querys_level(
    pipeline, shape, kind
) -> None:
    role, condition = INPUTS[kind]
    text = SHAPES[shape].format(where=_where(shape, condition))
    rows = run(pipeline, text, role, ONE)
    for row in rows:  # an empty group's row too: at [1, ⊥], not NULL
        assert row["_ss_lvl_0"] == ONE.words[0], (text, row)
        if kind == "null":
            assert all(row[c] is None for c in ("s", "lo", "hi", "a") if c in row), row
        elif "n" in row:
            assert row["n"] == 0, row
    if shape == "global" and kind != "denied":  # a global aggregate has its one group
        assert len(rows) == 1, rows


@pytest.mark.parametrize("shape", ["global", "join"])
def test_no_input_fails_an_aggregate_without_levels(pipeline, shape) -> None:
    """Without a level (levels off for the query) the empty group has no level words to
    stamp, and fails nothing either."""
    role, condition = INPUTS["empty"]
    rows = run(pipeline, SHAPES[shape].format(where=_where(shape, condition)), role, None)
    assert all(r["n"] == 0 for r in rows), rows


def test_an_empty_aggregate_of_its_own_is_at_its_level(pipeline) -> None:
    """The engine's own query path (not a network branch): the same empty group."""
    text = SHAPES["global"].format(where="WHERE svc = 'none'")
    admitted = pipeline.queries.admit(text, ["AUD"], ONE)
    query = pipeline.queries.register(admitted, MemorySink("ol_own_empty"))
    try:
        query.process_all_available()
        [row] = query.results()
    finally:
        query.stop()
    assert (row["n"], row["s"], row["_ss_lvl_0"]) == (0, None, ONE.words[0])


@pytest.mark.parametrize("kind", ["empty", *(["denied", "null"] if long_mode() else [])])
def test_no_input_fails_a_statistics_only_aggregate(pipeline, kind) -> None:
    """STAT reads v for statistics only: its aggregate runs on the statistics view."""
    condition = {"empty": "WHERE svc = 'none'", "denied": "", "null": "WHERE svc = 'null'"}[kind]
    level = ONE if kind != "denied" else QueryLevel(CLOUD, CLOUD.parse("[_, A]"))
    rows = run(pipeline, f"SELECT count(*) AS n, avg(v) AS a FROM Log {condition}", "STAT", level)
    assert all(r["_ss_lvl_0"] == level.words[0] for r in rows), rows


def test_a_selection_keeps_its_tuples_levels_and_an_aggregate_is_at_the_querys(
    pipeline,
) -> None:
    """At [T, T]: each selected row at its own tuple's level (a stateless selection); the
    count at [T, T] although its contributors' LUB is [T, B]; a window's rows at [T, T]
    (which tuples a [ROWS 1] window holds depends on every other tuple)."""
    selected = run(pipeline, "SELECT id FROM Log WHERE svc = 'five'", "AUD", TOP)
    got = {r["id"]: CLOUD.format(CLOUD.decode((r["_ss_lvl_0"],))) for r in selected}
    assert got == {3: "[1, ⊥]", 11: "[2, ⊥]", 21: "[⊥, B]"}
    [count] = run(pipeline, "SELECT count(*) AS n FROM Log WHERE svc = 'five'", "AUD", TOP)
    assert (count["n"], count["_ss_lvl_0"]) == (3, TOP.words[0])
    windowed = run(pipeline, "SELECT id FROM Log [ROWS 1] WHERE svc = 'five'", "AUD", TOP)
    assert {r["_ss_lvl_0"] for r in windowed} == {TOP.words[0]}, "a window's rows are at C"


def test_a_recipient_below_the_query_gets_nothing_of_its_aggregate(pipeline) -> None:
    """DESIGN.md 5a with write-equal: of a [T, T] query, a [1, ⊥] or [⊥, B] recipient
    receives no aggregate row (not even one over her own companies' tuples alone, whose
    LUB she dominates), and of a selection exactly the rows of her own tuples."""
    recipients = {"top": TOP, "one": ONE, "b": QueryLevel(CLOUD, CLOUD.parse("[_, B]"))}

    def deliver(text: str, aggregate: bool) -> dict[str, list]:
        got: dict[str, list] = {name: [] for name in recipients}
        delivery = Delivery(
            lambda _user: ({LOG}, set()),
            pipeline.queries.provenance,
            roles=lambda _s: pipeline.queries.codec.query(["AUD"]),
            aggregate=aggregate,
            levels=lambda subscription: recipients[subscription.user].words,
        )
        for name, rows in got.items():
            delivery.subscribe(name, lambda batch, rows=rows: rows.extend(batch))
        query = pipeline.cql.submit(pipeline.cql.admit(text, ["AUD"], TOP), CallbackSink(delivery))
        try:
            query.process_all_available()
        finally:
            pipeline.cql.stop(query.name)
        return got

    # company1's tuples alone: their LUB is [1, ⊥], the row is at [T, T]
    counts = deliver("SELECT count(*) AS n FROM Log WHERE id < 10", aggregate=True)
    assert [r["n"] for r in counts["top"]] == [3]
    assert counts["one"] == [] and counts["b"] == []
    selected = deliver("SELECT id FROM Log WHERE svc = 'five'", aggregate=False)
    assert sorted(r["id"] for r in selected["top"]) == [3, 11, 21]
    assert [r["id"] for r in selected["one"]] == [3]
    assert [r["id"] for r in selected["b"]] == [21]
