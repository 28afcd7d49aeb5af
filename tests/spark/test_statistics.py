"""Statistics-only access end to end: aggregates per role set against a plain-Python oracle.

The oracle decides every tuple with the reference ``label_for`` and applies the release
rule of ``lang/statistics_rewrite.py`` by brute force. Leak attempts check that a
statistics-only value never comes out raw, and groups below k are withheld.
"""

from __future__ import annotations

import random
from collections import defaultdict

import pytest

from streamshield.catalog.streams import StreamDefinition
from streamshield.engine.ingest.ingest import Ingest
from streamshield.engine.ingest.ingest_job import IngestJob
from streamshield.engine.queries.streaming_queries import MemorySink, QueryService
from streamshield.lang.cql import parse_policy
from streamshield.policy.bitset import Words
from streamshield.policy.elements import Channel, SpElement, TupleElement
from streamshield.policy.encoding import EncodedAccess, RoleCodec
from streamshield.policy.policy import Combine, ServerPolicy, label_for
from streamshield.policy.privileges import Privilege
from streamshield.policy.roles import RoleHierarchy
from tests.spark.test_ingest_job import land

pytestmark = pytest.mark.spark

K = 3
STREAM = StreamDefinition(
    "Vitals", (("pid", "bigint"), ("ward", "string"), ("hr", "bigint")), "pid"
)
NAMES = STREAM.names
HIERARCHY = RoleHierarchy.build(["A", "B", "H", "INS", "X"], [("H", "A")])
CODEC = RoleCodec(HIERARCHY)
SERVER = ServerPolicy(
    parse_policy(
        "INSERT SP INTO STREAM Vitals LET DDP = TUPLES: [0, 99], SRP = rbac:INS FOR STATISTICS",
        ts=1,
    ).sps,
    Combine.UNION,
)
# A reads everything; INS reads pid and ward, hr only for statistics (raw for 200, 201).
FIXED = """
INSERT SP INTO STREAM Vitals LET DDP = TUPLES: *, SRP = rbac:A;
INSERT SP INTO STREAM Vitals LET DDP = ATTRIBUTES: {pid, ward}, SRP = rbac:INS;
INSERT SP INTO STREAM Vitals LET DDP = ATTRIBUTES: hr, SRP = rbac:INS FOR STATISTICS;
INSERT SP INTO STREAM Vitals LET DDP = TUPLES: [200, 201] AND ATTRIBUTES: hr, SRP = rbac:INS
"""
FIXED_TUPLES = [(100, "small"), (101, "small")] + [(110 + i, "big") for i in range(4)]
FIXED_TUPLES += [(200, "mix"), (201, "mix"), (202, "mix")]  # 2 raw + 1 hidden: withheld


def _random_policy(rng: random.Random, ts: int) -> str:
    statements = []
    for _ in range(rng.randint(1, 4)):
        roles = rng.choice(["A", "B", "H", "INS", "X", "{A, B}", "{B, INS}", "*"])
        tuples = rng.choice(["*", "*", "[0, 49]", "[25, 99]"])
        attributes = rng.choice(["*", "*", "hr", "ward", "{pid, ward}", "{pid, hr}"])
        kind = rng.choice(["read", "read", "stats", "stats", "deny"])
        suffix = {"read": "", "stats": " FOR STATISTICS", "deny": ", SIGN = -"}[kind]
        statements.append(
            f"INSERT SP INTO STREAM Vitals LET DDP = TUPLES: {tuples} AND "
            f"ATTRIBUTES: {attributes}, SRP = rbac:{roles}{suffix}"
        )
    return ";".join(statements)


def _channel(provider: str, batches: list[tuple[str, list[tuple[int, str, int]]]]):
    """Elements of one channel and, per tuple, (values, policy)."""
    channel, seq, elements, tuples = Channel("Vitals", provider), 0, [], []
    for ts, (text, rows) in enumerate(batches, start=1):
        policy = parse_policy(text, ts=ts * 10)
        for sp in policy.sps:
            seq += 1
            elements.append(SpElement(channel, seq, sp))
        for tid, ward, hr in rows:
            seq += 1
            values = {"pid": tid, "ward": ward, "hr": hr}
            elements.append(TupleElement(channel, seq, tid, policy.ts, policy.csn, values))
            tuples.append((values, policy))
    return elements, tuples


def _dataset():
    rng = random.Random(20240607)
    elements, tuples = [], []
    for p in range(4):
        batches = []
        for b in range(2):
            rows = [
                (rng.randint(0, 99), rng.choice(["w1", "w2", "w3"]), rng.randint(60, 160))
                for _ in range(12)
            ]
            batches.append((_random_policy(rng, 10 * p + b), rows))
        more, labelled = _channel(f"p{p}", batches)
        elements += more
        tuples += labelled
    fixed_rows = [(tid, ward, 50 + tid % 7) for tid, ward in FIXED_TUPLES]
    more, labelled = _channel("fixed", [(FIXED, fixed_rows)])
    elements += more
    tuples += labelled
    labels = [
        (values, label_for(policy, "Vitals", values["pid"], NAMES, HIERARCHY, SERVER))
        for values, policy in tuples
    ]
    return elements, labels


ELEMENTS, LABELLED = _dataset()


@pytest.fixture(scope="module")
def service(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("statistics")
    land(root / "landing", ELEMENTS, 0)
    ingest = Ingest(spark, HIERARCHY, {"Vitals": STREAM}, {"Vitals": SERVER})
    job = IngestJob(ingest, root / "landing", root / "store")
    job.start(available_now=True).awaitTermination()
    service = QueryService(spark, {"Vitals": STREAM}, HIERARCHY, job.store, root, statistics_k=K)
    yield service
    for query in service.list():
        query.stop()


def run(service, sql: str, roles: list[str], table: str):
    query = service.register(service.admit(sql, roles), MemorySink(table))
    query.process_all_available()
    return query.results()


def oracle(roles: list[str], key: str | None) -> dict:
    """count(*), count(hr), sum, avg, min, max of hr per released group, by brute force."""
    effective = HIERARCHY.effective(roles)
    groups: dict = defaultdict(list)
    for values, label in LABELLED:
        if not label.visible(effective, Privilege.STATISTICS):
            continue
        read = label.visible_attributes(effective)
        stats = label.visible_attributes(effective, Privilege.STATISTICS)
        group = (values[key] if key in read else None) if key else None
        hr = values["hr"] if "hr" in stats else None
        groups[group].append((label.visible(effective), hr, "hr" in read))
    out = {}
    for group, members in groups.items():
        hidden_rows = sum(not tuple_read for tuple_read, _, _ in members)
        hidden_hr = sum(hr is not None and not full for _, hr, full in members)
        if any(0 < n < K for n in (hidden_rows, hidden_hr)):
            continue
        hrs = [hr for _, hr, _ in members if hr is not None]
        avg = sum(hrs) / len(hrs) if hrs else None
        out[group] = (len(members), len(hrs), sum(hrs) if hrs else None, avg,
                      min(hrs, default=None), max(hrs, default=None))  # fmt: skip
    return out


def _rows(rows, key: str | None) -> dict:
    return {
        (r[key] if key else None): (r["n"], r["c"], r["s"], r["a"], r["lo"], r["hi"]) for r in rows
    }


def _same(got: tuple, expected: tuple) -> bool:
    avg_ok = got[3] == expected[3] or got[3] == pytest.approx(expected[3])
    return got[:3] == expected[:3] and got[4:] == expected[4:] and avg_ok


AGGREGATES = (
    "count(*) AS n, count(hr) AS c, sum(hr) AS s, avg(hr) AS a, min(hr) AS lo, max(hr) AS hi"
)


@pytest.mark.parametrize(
    "roles", [["A"], ["B"], ["INS"], ["H", "INS"], ["X"]], ids=lambda r: "+".join(r)
)
def test_grouped_aggregates_match_the_oracle(service, roles) -> None:
    sql = f"SELECT ward, {AGGREGATES} FROM Vitals GROUP BY ward"
    got = _rows(run(service, sql, roles, f"grouped_{'_'.join(roles)}"), "ward")
    expected = oracle(roles, "ward")
    assert got.keys() == expected.keys()
    for group, values in expected.items():
        assert _same(got[group], values), group


def test_global_aggregate_matches_the_oracle(service) -> None:
    rows = run(service, f"SELECT {AGGREGATES} FROM Vitals", ["B"], "global_b")
    expected = oracle(["B"], None)
    got = _rows(rows, None)
    assert got.keys() == expected.keys()
    for group, values in expected.items():
        assert _same(got[group], values), group


def test_oracle_exercises_statistics_only_rows() -> None:
    """The data must contain the cases the leak tests are about, or they prove nothing."""
    ins = oracle(["INS"], "ward")
    assert "big" in ins and "small" not in ins and "mix" not in ins
    assert ins["big"][1:3] == (4, 212)  # hr = 50 + pid % 7: 55, 56, 50, 51


# -- leak attempts ----------------------------------------------------------------------


def test_statistics_only_role_gets_no_raw_value(service) -> None:
    rows = run(service, "SELECT pid, hr FROM Vitals WHERE pid >= 100", ["INS"], "raw_ins")
    assert {r["pid"] for r in rows} == {t for t, _ in FIXED_TUPLES}  # pid is READ
    assert {r["pid"]: r["hr"] for r in rows if r["hr"] is not None} == {200: 54, 201: 55}


def test_collect_list_sees_only_raw_values(service) -> None:
    sql = "SELECT ward, collect_list(hr) AS hrs FROM Vitals WHERE pid >= 100 GROUP BY ward"
    rows = run(service, sql, ["INS"], "collect_ins")
    got = {r["ward"]: sorted(r["hrs"]) for r in rows}
    assert got == {"small": [], "big": [], "mix": [54, 55]}


def test_case_inside_an_aggregate_sees_only_raw_values(service) -> None:
    sql = (
        "SELECT max(CASE WHEN pid = 111 THEN hr END) AS m, count(*) AS n "
        "FROM Vitals WHERE pid >= 100"
    )
    rows = run(service, sql, ["INS"], "case_ins")
    assert len(rows) == 1 and rows[0]["m"] is None and rows[0]["n"] >= K


def test_filter_clause_sees_only_raw_values(service) -> None:
    sql = "SELECT avg(hr) FILTER (WHERE pid = 111) AS m FROM Vitals WHERE pid >= 100"
    rows = run(service, sql, ["INS"], "filter_ins")
    assert len(rows) == 1 and rows[0]["m"] is None


def test_where_on_a_statistics_only_attribute_sees_null(service) -> None:
    sql = "SELECT count(*) AS n FROM Vitals WHERE hr > 0 AND pid BETWEEN 110 AND 113"
    rows = run(service, sql, ["INS"], "where_ins")
    assert [r["n"] for r in rows] in ([], [0])


def test_small_groups_are_withheld(service) -> None:
    sql = "SELECT ward, avg(hr) AS a FROM Vitals WHERE pid >= 100 GROUP BY ward"
    rows = run(service, sql, ["INS"], "small_ins")
    assert {r["ward"]: r["a"] for r in rows} == {"big": pytest.approx(53.0)}


def test_group_by_a_statistics_only_attribute_gives_no_value(service) -> None:
    sql = "SELECT hr, count(*) AS n FROM Vitals WHERE pid >= 100 GROUP BY hr"
    rows = run(service, sql, ["INS"], "groupby_ins")
    # pid 110 has hr 55 too, but only for statistics: it must stay in the NULL group
    assert {r["hr"]: r["n"] for r in rows} == {None: 7, 54: 1, 55: 1}


def _decode(row, prefix: str) -> frozenset[str]:
    words: Words = tuple(row[f"_ss_{prefix}0_{w}"] for w in range(CODEC.width))
    blank = (0,) * CODEC.width
    access = CODEC.decode(
        EncodedAccess(words, blank) if prefix == "r" else EncodedAccess(blank, words)
    )
    return access.readers if prefix == "r" else access.denied


def _measure_readers(row, column: int) -> frozenset[str]:
    """Who may read output ``column`` (its dependency slot: the READ block only)."""
    read = tuple(row[f"_ss_col{column}x0_r{w}"] for w in range(CODEC.block_width))
    words: Words = read + (0,) * (CODEC.width - len(read))
    return CODEC.decode(EncodedAccess(words, (0,) * CODEC.width)).readers


def test_output_label_admits_statistics_holders_only(service) -> None:
    sql = "SELECT ward, avg(hr) AS a FROM Vitals WHERE pid >= 100 GROUP BY ward"
    rows = run(service, sql, ["INS"], "label_ins")
    (big,) = [r for r in rows if r["ward"] == "big"]
    readers, denied = _decode(big, "r"), _decode(big, "d")
    assert "INS" in readers and not {"B", "X"} & readers  # B and X hold nothing here
    assert not denied & {"INS", "A"}


def test_full_readers_keep_small_groups_and_their_label(service) -> None:
    sql = "SELECT ward, avg(hr) AS a FROM Vitals WHERE pid >= 100 GROUP BY ward"
    rows = run(service, sql, ["A"], "label_a")
    by_ward = {r["ward"]: r for r in rows}
    assert set(by_ward) == {"small", "big", "mix"}
    small = by_ward["small"]
    # INS reads the rows' ward (and the tuples): the row is hers; the average of a small
    # group over heart rates she only has for statistics is not (its column slot).
    assert "A" in _decode(small, "r") and "A" in _measure_readers(small, 1)
    assert "INS" not in _measure_readers(small, 1)
