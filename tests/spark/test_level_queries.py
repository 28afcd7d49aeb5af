"""Chinese-Wall levels on Spark (paper 2, sections 3-4): secure ingest stamps each
tuple's level, queries at a level read only what it dominates (selections, windows,
joins, aggregates), a selection's rows keep their tuples' levels and every other
query's are at its level (write-equal), and delivery checks each recipient's own
level. The pure lattice (``QueryLevel.reads``) is the oracle.

The paper's cloud-auditing lattice: COI1 = {1, 2}, COI2 = {A, B, C}. One landing, one
ingest for the module; each query is its own micro-batch run (``processAllAvailable``).
"""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

from streamshield.catalog import SqliteCatalog, StreamDefinition
from streamshield.engine.delivery.delivery import Delivery
from streamshield.engine.levels.level_processor import POOL, LevelStorageError
from streamshield.engine.pipeline import Pipeline
from streamshield.engine.queries.streaming_queries import CallbackSink, MemorySink
from streamshield.engine.views import level_columns
from streamshield.engine.views.secured_view import tuple_test
from streamshield.lang.cql import parse_policy
from streamshield.lang.output_level import OutputLevel
from streamshield.lang.query_check import QueryRejected
from streamshield.policy.elements import Channel, SpElement, TupleElement
from streamshield.policy.lattice import Lattice
from streamshield.policy.level_assignment import LevelAssignment
from streamshield.policy.query_level import QueryLevel
from tests.conformance.levels import cases, lattice

pytestmark = pytest.mark.spark

CLOUD = Lattice.of({"COI1": ["1", "2"], "COI2": ["A", "B", "C"]})
LOG, NOTICES, AUDIT = "MessageLog", "Notices", "Audit"
ASSIGNMENT = LevelAssignment(
    CLOUD,
    streams={
        LOG: CLOUD.parse("[T, T]"),
        NOTICES: CLOUD.parse("[_, T]"),
        AUDIT: CLOUD.parse("[T, T]"),
    },
    channels={
        (LOG, "company1"): CLOUD.parse("[1, _]"),
        (LOG, "company2"): CLOUD.parse("[2, _]"),
        (LOG, "companyA"): CLOUD.parse("[_, A]"),
        (LOG, "companyB"): CLOUD.parse("[_, B]"),
        (LOG, "pub"): CLOUD.public,
        (NOTICES, "hqB"): CLOUD.parse("[_, B]"),
        (AUDIT, "company1"): CLOUD.parse("[1, _]"),
    },
)
# provider -> ids of its tuples (the tuple id is the join key too)
LOG_TUPLES = {
    "company1": [1, 2, 3],
    "company2": [11, 12, 13],
    "companyA": [21, 22, 23],
    "companyB": [31, 32, 33],
    "pub": [41, 42],
}
NOTICE_TUPLES = {"hqB": [1, 2, 21]}
AUDIT_TUPLES = {"company1": [51, 52]}  # held WITH GRANT OPTION: ON RESULT may pass them on
CURRENT = [ASSIGNMENT]  # what the catalog answers now (the last test changes it)
ROLES = ["AUD"]


def at(text: str) -> QueryLevel:
    return QueryLevel(CLOUD, CLOUD.parse(text))


def elements() -> list:
    out: list = []
    for stream, tuples in ((LOG, LOG_TUPLES), (NOTICES, NOTICE_TUPLES), (AUDIT, AUDIT_TUPLES)):
        grant = " WITH GRANT OPTION" if stream == AUDIT else ""
        policy = parse_policy(
            f"INSERT SP INTO STREAM {stream} LET DDP = STREAMS: {stream}, SRP = rbac:AUD{grant}",
            ts=100,
        )
        for provider, ids in tuples.items():
            channel = Channel(stream, provider)
            out += [SpElement(channel, sp.sn, sp) for sp in policy.sps]
            for seq, tid in enumerate(ids, start=len(policy.sps) + 1):
                values = {"id": tid, "msgType": f"{provider}-{tid}"}
                out.append(TupleElement(channel, seq, tid, 100, policy.csn, values))
    return out


def readable(level: QueryLevel, stream: str, tuples: dict[str, list[int]]) -> list[int]:
    """The oracle: ids of the tuples whose assigned level ``level`` dominates."""
    return sorted(
        tid
        for provider, ids in tuples.items()
        if level.reads(ASSIGNMENT.tuple_words(stream, provider))
        for tid in ids
    )


class Collect:
    def __init__(self) -> None:
        self.rows: list[dict] = []

    def __call__(self, frame, _batch_id) -> None:
        self.rows += [r.asDict() for r in frame.collect()]


@pytest.fixture(scope="module")
def pipeline(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("levels")
    catalog = SqliteCatalog(root / "catalog.db")
    for name in (LOG, NOTICES, AUDIT):
        catalog.register_stream(
            StreamDefinition(name, (("id", "bigint"), ("msgType", "string")), "id")
        )
    catalog.set_roles(ROLES, [])
    pipeline = Pipeline(spark, catalog, root, levels=lambda: CURRENT[0])
    assert not pipeline.landing.append(elements()).rejected
    pipeline.ingest_available()
    yield pipeline
    for query in list(pipeline.queries.list()):
        pipeline.cql.stop(query.name)


def submit(pipeline, text: str, level: QueryLevel | None, sink=None):
    rows = sink or Collect()
    query = pipeline.cql.submit(pipeline.cql.admit(text, ROLES, level), CallbackSink(rows))
    query.process_all_available()
    return rows.rows if sink is None else query


def test_ingest_stamps_each_channels_level(spark, pipeline) -> None:
    stored = spark.read.parquet(str(pipeline.queries.labelled.path(LOG)))
    got = {
        (r["provider"], r["_ss_lvl_0"]) for r in stored.select("provider", "_ss_lvl_0").collect()
    }
    assert got == {(p, ASSIGNMENT.tuple_words(LOG, p)[0]) for p in LOG_TUPLES}


@pytest.mark.parametrize("text", ["[1, B]", "[_, _]", "[T, T]"])
def test_a_selection_reads_exactly_what_its_level_dominates(pipeline, text) -> None:
    rows = submit(pipeline, "SELECT id, msgType FROM MessageLog", at(text))
    assert sorted(r["id"] for r in rows) == readable(at(text), LOG, LOG_TUPLES)
    for row in rows:  # a selection keeps its tuple's level, dominated by the query's
        assert at(text).reads((row["_ss_lvl_0"],))


def test_level_one_sees_company_one_and_public_never_company_two(pipeline) -> None:
    rows = submit(pipeline, "SELECT id FROM MessageLog WHERE id < 100", at("[1, _]"))
    assert sorted(r["id"] for r in rows) == [1, 2, 3, 41, 42]


def test_the_native_query_service_filters_the_same(spark, pipeline) -> None:
    admitted = pipeline.queries.admit("SELECT id FROM MessageLog", ROLES, at("[2, A]"))
    query = pipeline.queries.register(admitted, MemorySink("lvl_native"))
    query.process_all_available()
    assert sorted(r["id"] for r in query.results()) == readable(at("[2, A]"), LOG, LOG_TUPLES)


def test_a_rows_window_holds_only_dominated_tuples(pipeline) -> None:
    """The 4 latest tuples the level reads, of the stream (one ingest batch: by channel,
    then seq; lang/windows.py StreamPosition), never one above the level."""
    sql = "SELECT id FROM MessageLog [ROWS 4]"
    assert sorted(r["id"] for r in submit(pipeline, sql, at("[1, _]"))) == [2, 3, 41, 42]
    assert sorted(r["id"] for r in submit(pipeline, sql, at("[T, T]"))) == [32, 33, 41, 42]
    count = "SELECT count(*) AS n FROM MessageLog [ROWS 4]"
    assert [r["n"] for r in submit(pipeline, count, at("[T, T]"))] == [4]  # not 4 per channel


def test_an_aggregate_is_labelled_with_its_querys_level(pipeline) -> None:
    """Write-equal: the count's level is the query's, not its contributors' LUB
    (``[1, B]`` reads company1's, companyB's and public tuples: LUB ``[1, B]``; at
    ``[2, B]`` only companyB's and public ones, LUB ``[⊥, B]``)."""
    sql = "SELECT count(*) AS n FROM MessageLog"
    [row] = submit(pipeline, sql, at("[1, B]"))
    assert row["n"] == len(readable(at("[1, B]"), LOG, LOG_TUPLES)) == 8
    assert CLOUD.decode((row["_ss_lvl_0"],)) == CLOUD.parse("[1, B]")
    [low] = submit(pipeline, sql, at("[2, B]"))
    assert (low["n"], CLOUD.decode((low["_ss_lvl_0"],))) == (8, CLOUD.parse("[2, B]"))


def test_a_join_pairs_only_dominated_tuples_at_the_querys_level(pipeline) -> None:
    """A pair exists only while both tuples are in their windows, which depends on every
    tuple the query reads: each pair is written at the query's level."""
    sql = (
        "SELECT m.id AS id, n.msgType AS notice FROM MessageLog [ROWS 100] m "
        "JOIN Notices [ROWS 100] n ON m.id = n.id"
    )
    rows = submit(pipeline, sql, at("[1, B]"))
    assert sorted(r["id"] for r in rows) == [1, 2]  # company A's 21 is above [1, B]
    assert {CLOUD.format(CLOUD.decode((r["_ss_lvl_0"],))) for r in rows} == {"[1, B]"}
    top = submit(pipeline, sql, at("[T, T]"))
    levels_of = {r["id"]: CLOUD.format(CLOUD.decode((r["_ss_lvl_0"],))) for r in top}
    assert levels_of == {1: "[T, T]", 2: "[T, T]", 21: "[T, T]"}  # not their LUBs


def test_a_recipient_gets_only_rows_her_own_level_dominates(pipeline) -> None:
    """DESIGN.md 5a: a query at the top, delivered to recipients at other levels."""
    recipients = {"top": at("[T, T]"), "one": at("[1, _]"), "b": at("[_, B]")}
    got: dict[str, list[int]] = {name: [] for name in [*recipients, "broken"]}

    def level_of(subscription):
        if subscription.user == "broken":
            raise RuntimeError("catalog unreachable")
        return recipients[subscription.user].words

    delivery = Delivery(
        lambda _user: ({LOG}, set()),
        pipeline.queries.provenance,
        roles=lambda _s: pipeline.queries.codec.query(ROLES),
        levels=level_of,
    )
    for name, ids in got.items():
        delivery.subscribe(name, lambda rows, ids=ids: ids.extend(r["id"] for r in rows))
    submit(pipeline, "SELECT id FROM MessageLog", at("[T, T]"), sink=delivery)
    for name, level in recipients.items():
        assert sorted(got[name]) == readable(level, LOG, LOG_TUPLES), name
    assert got["broken"] == []  # a level that cannot be read delivers nothing


def test_queries_cannot_name_or_compute_the_level(pipeline) -> None:
    for text in (
        "SELECT id, _ss_lvl_0 FROM MessageLog",
        "SELECT id, level FROM MessageLog",
        "SELECT id AS level FROM MessageLog",
        "SELECT count(*) AS level FROM MessageLog [ROWS 5]",
        "SELECT m.id AS level FROM MessageLog [ROWS 5] m JOIN Notices [ROWS 5] n ON m.id = n.id",
    ):
        with pytest.raises(QueryRejected) as refused:
            pipeline.cql.submit(
                pipeline.cql.admit(text, ROLES, at("[T, T]")), CallbackSink(Collect())
            )
        assert refused.value.rule == "reserved_name", text


def test_an_output_at_its_querys_level_replaces_every_rows_words(spark) -> None:
    """Write-equal: every row (a NULL word, an empty group's, included) gets C's words;
    a stateless selection's rows keep theirs; an output without level words stays so."""
    frame = spark.createDataFrame([(1, 1), (2, None)], "id bigint, _ss_lvl_0 bigint")
    one = at("[1, _]")  # company 1 is bit 0
    stamped = level_columns.at_output_level(frame, one, OutputLevel.QUERY)
    assert [r["_ss_lvl_0"] for r in stamped.orderBy("id").collect()] == [1, 1]
    assert stamped.columns == frame.columns
    kept = level_columns.at_output_level(frame, one, OutputLevel.ROW)
    assert [r["_ss_lvl_0"] for r in kept.orderBy("id").collect()] == [1, None]
    bare = frame.drop("_ss_lvl_0")
    assert level_columns.at_output_level(bare, one, OutputLevel.QUERY).columns == ["id"]


def test_the_view_conjunct_agrees_with_the_pure_lattice_on_the_table(spark) -> None:
    """levels.json: a tuple at ``a`` passes a view at ``b`` iff the lattice says a <= b."""
    pairs = [c for c in cases("a", "b") if c["lattice"] == "cloud"]
    lat = lattice("cloud")
    schema = StructType([StructField("id", LongType()), StructField("_ss_lvl_0", LongType())])
    rows = [(c["id"], lat.encode(lat.parse(c["a"]))[0]) for c in pairs]
    frame = spark.createDataFrame(rows, schema)
    tests = {
        c["id"]: tuple_test(F.lit(True), QueryLevel(lat, lat.parse(c["b"])), frame.columns)
        for c in pairs
    }
    chosen = F.lit(None)
    for case_id, test in tests.items():
        chosen = F.when(F.col("id") == case_id, test).otherwise(chosen)
    got = {r["id"]: r["ok"] for r in frame.select("id", chosen.alias("ok")).collect()}
    expected = {
        c["id"]: QueryLevel(lat, lat.parse(c["b"])).reads(lat.encode(lat.parse(c["a"])))
        for c in pairs
    }
    assert got == expected
    assert expected == {c["id"]: c["a_dominated_by_b"] for c in pairs}


def test_a_delegating_query_writes_its_derived_stream_at_its_level(spark, pipeline) -> None:
    """Restricted star property: ON RESULT at [1, ⊥] lands a derived stream at [1, ⊥]."""
    text = (
        "SELECT id, msgType FROM Audit "
        "ON RESULT INSERT SP INTO STREAM  LET DDP = TUPLES: *, SRP = rbac:AUD"
    )
    with pytest.raises(QueryRejected) as refused:  # nowhere to record the level: refused
        pipeline.cql.submit(pipeline.cql.admit(text, ROLES, at("[1, _]")), CallbackSink(Collect()))
    assert refused.value.rule == "on_result"
    written: list[tuple[str, str]] = []

    def write_level(stream: str, level: QueryLevel) -> None:  # what the catalog does
        written.append((stream, level.text))
        now = CURRENT[0]
        CURRENT[0] = LevelAssignment(CLOUD, {**now.streams, stream: level.level}, now.channels)

    pipeline.cql.write_level = write_level
    try:
        query = pipeline.cql.submit(
            pipeline.cql.admit(text, ROLES, at("[1, _]")), CallbackSink(Collect()), "deleg"
        )
        query.process_all_available()
        pipeline.ingest_available()
    finally:
        pipeline.cql.write_level = None
    assert written == [("deleg_result", "[1, ⊥]")]
    stored = spark.read.parquet(str(pipeline.queries.labelled.path("deleg_result")))
    assert {r["_ss_lvl_0"] for r in stored.select("_ss_lvl_0").collect()} == {1}  # [1, ⊥]
    sql = "SELECT id FROM deleg_result"
    assert sorted(r["id"] for r in submit(pipeline, sql, at("[1, _]"))) == [51, 52]
    assert submit(pipeline, sql, at("[2, T]")) == []


def test_queries_of_one_level_share_a_processor_made_and_removed_on_demand(pipeline) -> None:
    """Section 6: one processor per level, created with its first query and removed with
    its last; each level's networks, windows and checkpoints in its own directory."""
    processors, cql = pipeline.cql.processors, pipeline.cql
    high, low = at("[2, C]"), at("[2, _]")
    before = set(processors.active())
    selection, window, other = Collect(), Collect(), Collect()
    for name, text, level, sink in (
        ("lp_sel", "SELECT id FROM MessageLog", high, selection),
        ("lp_win", "SELECT count(*) AS n FROM MessageLog [ROWS 1]", high, window),
        ("lp_low", "SELECT id FROM MessageLog", low, other),
    ):
        cql.submit(cql.admit(text, ROLES, level), CallbackSink(sink), name=name)
        cql.queries.queries[name].process_all_available()
    mine = {n: p for n, p in processors.active().items() if n not in before}
    assert len(mine) == 2  # two levels, two processors; the high one runs two queries
    [shared] = [p for p in mine.values() if p.level == high]
    [alone] = [p for p in mine.values() if p.level == low]
    assert shared.queries == {"lp_sel", "lp_win"} and alone.queries == {"lp_low"}
    assert shared.session is not alone.session and shared.root != alone.root
    # Each level's network over MessageLog is its own, under its own directory.
    assert cql.networks[(LOG, shared.name)] is not cql.networks[(LOG, alone.name)]
    assert cql.networks[(LOG, shared.name)].root == shared.root / "networks" / LOG
    assert cql.window_networks[(LOG, shared.name)].root == shared.root / "window-networks" / LOG
    assert (shared.root / "window-networks" / LOG).is_dir()
    assert not (alone.root / "window-networks").exists()
    assert sorted(r["id"] for r in selection.rows) == readable(high, LOG, LOG_TUPLES)
    assert sorted(r["id"] for r in other.rows) == readable(low, LOG, LOG_TUPLES)
    cql.stop("lp_sel")
    assert shared.name in processors.active()  # one query left at [2, C]
    cql.stop("lp_win")
    cql.stop("lp_low")
    assert set(processors.active()) == before  # the last query took its processor along
    assert (shared.root / "window-networks" / LOG).is_dir()  # storage stays for a restart


def test_a_processor_cannot_open_another_levels_storage(pipeline, tmp_path) -> None:
    processors = pipeline.cql.processors
    one = processors.acquire(at("[1, _]"), "storage-one")
    two = processors.acquire(at("[_, A]"), "storage-two")
    try:
        assert one.path("joins", "x") == (one.root / "joins" / "x").resolve()
        (one.root / "link").unlink(missing_ok=True)
        (one.root / "link").symlink_to(two.root)
        for escape in (
            ("..", two.name, "checkpoints"),  # up and into the other level
            (str(two.root / "joins"),),  # an absolute path
            ("link", "windows"),  # a symlink out of its directory
            (str(tmp_path),),  # anywhere else
        ):
            with pytest.raises(LevelStorageError):
                one.path(*escape)
    finally:
        (one.root / "link").unlink(missing_ok=True)
        processors.release("storage-one")
        processors.release("storage-two")


def test_the_shepherd_feeds_a_processor_only_what_its_level_dominates(spark, pipeline) -> None:
    processors = pipeline.cql.processors
    level = at("[1, B]")
    processor = processors.acquire(level, "shepherd")
    try:
        stored = spark.read.parquet(str(pipeline.queries.labelled.path(LOG)))
        fed = processor.shepherd(stored).filter(F.col("tid").isNotNull())
        assert sorted(int(r["tid"]) for r in fed.select("tid").collect()) == readable(
            level, LOG, LOG_TUPLES
        )
        context = spark.sparkContext
        with processor.pool():  # streaming queries started here take the level's pool
            assert context.getLocalProperty(POOL) == processor.name
        assert context.getLocalProperty(POOL) is None
    finally:
        processors.release("shepherd")


def test_a_level_change_applies_to_tuples_ingested_after_it(spark, pipeline) -> None:
    """Runs last: company1's channel moves to [T, ⊥]; its stored tuples keep [1, ⊥]."""
    moved = dict(ASSIGNMENT.channels)
    moved[(LOG, "company1")] = CLOUD.parse("[T, _]")
    CURRENT[0] = LevelAssignment(CLOUD, ASSIGNMENT.streams, moved)
    try:
        policy = parse_policy(
            f"INSERT SP INTO STREAM {LOG} LET DDP = STREAMS: {LOG}, SRP = rbac:AUD", ts=100
        )
        late = TupleElement(Channel(LOG, "company1"), 10, 4, 100, policy.csn, {"id": 4})
        assert pipeline.landing.append([late]).accepted == 1
        pipeline.ingest_available()
    finally:
        CURRENT[0] = ASSIGNMENT
    stored = spark.read.parquet(str(pipeline.queries.labelled.path(LOG)))
    rows = stored.filter("provider = 'company1'").select("id", "_ss_lvl_0").collect()
    words = {r["id"]: CLOUD.format(CLOUD.decode((r["_ss_lvl_0"],))) for r in rows}
    assert words == {1: "[1, ⊥]", 2: "[1, ⊥]", 3: "[1, ⊥]", 4: "[T, ⊥]"}
