"""``[ROWS n]`` holds the n latest tuples of the stream its query may read, n in all.

The paper's ``[ROWS 100 WHERE Level DOMINATED BY C]`` (CW streams) and CQL's ``[ROWS n]``
count tuples of the stream, not of each channel (DESIGN.md 5c). Order exists only within
a channel, so "latest" across channels is the order lang/windows.py ``StreamPosition``
fixes: the ingest batch that labelled a tuple, then its channel, then ``seq``. Every
engine path of row windows must count in it after the query's roles and level have
filtered (a window query of its own, a window network's branches, its late branches'
catch-up, the shared join); ``latest_rows`` is the reference they are held to.

The cloud-auditing lattice, COI1 = {1, 2}, COI2 = {A, B, C}. One pipeline for the module;
each test has a stream of its own.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import pytest

from streamshield.catalog import SqliteCatalog, StreamDefinition
from streamshield.engine.pipeline import Pipeline
from streamshield.engine.queries.streaming_queries import CallbackSink
from streamshield.lang.cql import parse_policy
from streamshield.policy.elements import Channel, SpElement, TupleElement
from streamshield.policy.lattice import Lattice
from streamshield.policy.level_assignment import LevelAssignment
from streamshield.policy.query_level import QueryLevel
from tests.conftest import long_mode

pytestmark = pytest.mark.spark

CLOUD = Lattice.of({"COI1": ["1", "2"], "COI2": ["A", "B", "C"]})
POSTS, MIXED = "Posts", "Mixed"
CHANNEL_LEVELS = {
    (POSTS, "company1"): "[1, _]",
    (POSTS, "pub"): "[_, _]",
    (MIXED, "a"): "[1, _]",
    (MIXED, "b"): "[_, _]",
    (MIXED, "c"): "[2, _]",
    (MIXED, "d"): "[1, _]",
}
CHANNEL_ROLES = {  # who the channel's policy grants
    (POSTS, "company1"): ("AUD",),
    (POSTS, "pub"): ("AUD", "GUEST"),
    (MIXED, "a"): ("AUD",),
    (MIXED, "b"): ("AUD", "GUEST"),
    (MIXED, "c"): ("AUD",),
    (MIXED, "d"): ("GUEST",),
}
ASSIGNMENT = LevelAssignment(
    CLOUD,
    streams={POSTS: CLOUD.parse("[T, T]"), MIXED: CLOUD.parse("[T, T]")},
    channels={channel: CLOUD.parse(text) for channel, text in CHANNEL_LEVELS.items()},
)


def at(text: str) -> QueryLevel:
    return QueryLevel(CLOUD, CLOUD.parse(text))


class Collect:
    """A per-batch sink: each batch's rows (user columns) as one list."""

    def __init__(self) -> None:
        self.batches: list[list[dict]] = []

    def __call__(self, frame, _batch_id) -> None:
        users = [c for c in frame.columns if not c.startswith("_ss_")]
        self.batches.append([r.asDict() for r in frame.select(*users).collect()])

    @property
    def rows(self) -> list[dict]:
        return [row for batch in self.batches for row in batch]


@dataclass
class Feed:
    """Lands tuples channel by channel, keeping each channel's seq."""

    pipeline: Pipeline
    seqs: dict[tuple[str, str], int] = field(default_factory=dict)

    def land(self, tuples: dict[tuple[str, str], list[tuple[int, int]]]) -> None:
        """``tuples``: per channel, ``(id, k)`` in order; one landing, then ingest."""
        elements: list = []
        for (stream, provider), values in tuples.items():
            channel = Channel(stream, provider)
            policy = self._policy(stream, provider)
            if (stream, provider) not in self.seqs:
                elements += [SpElement(channel, sp.sn, sp) for sp in policy.sps]
                self.seqs[(stream, provider)] = len(policy.sps)
            for tid, k in values:
                self.seqs[(stream, provider)] += 1
                seq = self.seqs[(stream, provider)]
                row = {"id": tid, "k": k}
                elements.append(TupleElement(channel, seq, tid, 100, policy.csn, row))
        assert not self.pipeline.landing.append(elements).rejected
        self.pipeline.ingest_available()

    @staticmethod
    def _policy(stream: str, provider: str):
        text = ";\n".join(
            f"INSERT SP INTO STREAM {stream} LET DDP = STREAMS: {stream}, SRP = rbac:{role}"
            for role in CHANNEL_ROLES[(stream, provider)]
        )
        return parse_policy(text, ts=100)


@pytest.fixture(scope="module")
def feed(spark, tmp_path_factory) -> Iterator[Feed]:
    root = tmp_path_factory.mktemp("rows")
    catalog = SqliteCatalog(root / "catalog.db")
    for name in (POSTS, MIXED):
        catalog.register_stream(StreamDefinition(name, (("id", "bigint"), ("k", "bigint")), "id"))
    catalog.set_roles(["AUD", "GUEST"], [])
    pipeline = Pipeline(spark, catalog, root, levels=lambda: ASSIGNMENT)
    yield Feed(pipeline)
    for query in list(pipeline.queries.list()):
        pipeline.cql.stop(query.name)


def submit(feed: Feed, text: str, role: str, level: str, alone: bool = False):
    """The query through the query interface (``alone``: a window query of its own, not
    a branch of the stream's window network), with its sink."""
    cql, rows = feed.pipeline.cql, Collect()
    cql.tuning = replace(cql.tuning, share_windows=not alone)
    try:
        query = cql.submit(cql.admit(text, [role], at(level)), CallbackSink(rows))
    finally:
        cql.tuning = replace(cql.tuning, share_windows=True)
    query.process_all_available()
    return query, rows


COUNT = "SELECT count(*) AS n, min(id) AS lo FROM Posts [ROWS 100]"


def test_rows_at_a_level_counts_the_latest_of_the_stream_not_of_each_channel(feed) -> None:
    """[1, ⊥] ids 1-150, then public ids 3001-3050: [ROWS 100] at [1, ⊥] reads both
    channels and holds 101-150 and 3001-3050 (n 100, lo 101), on every engine path;
    counted per channel it held 150 tuples from 51. A self-join on k pairs a public
    tuple (k 51-100) with company 1's 51-100 only if those stayed in its window."""
    running = {
        "branch": submit(feed, COUNT, "AUD", "[1, _]"),
        "alone": submit(feed, COUNT, "AUD", "[1, _]", alone=True),
        "join": submit(
            feed,
            "SELECT a.id AS x, b.id AS y FROM Posts [ROWS 100] a JOIN Posts [ROWS 100] b "
            "ON a.k = b.k",
            "AUD",
            "[1, _]",
        ),
    }
    feed.land({(POSTS, "company1"): [(i, i) for i in range(1, 151)]})
    for query, _rows in running.values():
        query.process_all_available()
    feed.land({(POSTS, "pub"): [(3000 + j, 50 + j) for j in range(1, 51)]})
    for query, _rows in running.values():
        query.process_all_available()

    for name in ("branch", "alone"):
        assert running[name][1].rows[-1] == {"n": 100, "lo": 101}, name
    pairs = running["join"][1].batches
    assert len(pairs[-1]) == 50, "the new public tuples pair only among themselves"
    assert {(r["x"], r["y"]) for r in pairs[-1]} == {(3000 + j, 3000 + j) for j in range(1, 51)}
    # registered after the data: a late branch's catch-up and a query of its own
    for alone in (False, True):
        _query, rows = submit(feed, COUNT, "AUD", "[1, _]", alone=alone)
        assert rows.rows[-1] == {"n": 100, "lo": 101}, alone
    # roles filter before the window too: GUEST reads the public channel only
    assert submit(feed, COUNT, "GUEST", "[1, _]")[1].rows[-1] == {"n": 50, "lo": 3001}


# -- the engine against the reference on random interleavings ----------------------------

AGGREGATE = "SELECT count(*) AS n, min(id) AS lo, max(id) AS hi, sum(id) AS s FROM Mixed [ROWS {}]"
SELECTION = "SELECT id FROM Mixed [ROWS {}]"
JOIN = "SELECT a.id AS x, b.id AS y FROM Mixed [ROWS {}] a JOIN Mixed [ROWS {}] b ON a.k = b.k"


@dataclass(frozen=True)
class Case:
    """One query of the differential run: its text's parts, role, level, engine path."""

    kind: str  # "aggregate", "selection", "join"
    sizes: tuple[int, ...]
    role: str
    level: str
    alone: bool = False

    @property
    def text(self) -> str:
        return {"aggregate": AGGREGATE, "selection": SELECTION, "join": JOIN}[self.kind].format(
            *self.sizes
        )


CASES = (
    Case("aggregate", (5,), "AUD", "[1, _]"),
    Case("selection", (3,), "AUD", "[1, _]"),  # the same node as the one above
    Case("aggregate", (4,), "GUEST", "[1, _]"),  # a node of another visibility
    Case("aggregate", (6,), "AUD", "[T, T]", alone=True),
    Case("join", (4, 6), "AUD", "[1, _]"),
)
LONG_CASES = (
    Case("selection", (2,), "GUEST", "[T, T]", alone=True),
    Case("join", (3, 3), "GUEST", "[T, T]"),
)
LATE = (Case("aggregate", (7,), "AUD", "[1, _]"),)  # a branch's catch-up
LONG_LATE = (Case("aggregate", (5,), "GUEST", "[T, T]", alone=True),)


def readable(case: Case, channel: tuple[str, str]) -> bool:
    """Whether the case's query may read the channel's tuples (its own oracle: the
    channel's roles and the pure lattice)."""
    level = at(case.level)
    return case.role in CHANNEL_ROLES[channel] and level.reads(ASSIGNMENT.tuple_words(*channel))


def stored(feed: Feed) -> list[dict]:
    """Mixed's labelled tuples with the ingest batch each is stored under."""
    spark = feed.pipeline.queries.spark
    path = feed.pipeline.queries.labelled.path(MIXED)
    frame = spark.read.parquet(str(path)).select("batch", "stream", "provider", "seq", "id", "k")
    return [r.asDict() for r in frame.collect()]


def expected_windows(case: Case, tuples: list[dict], size: int) -> list[dict]:
    from streamshield.lang.windows import StreamPosition, latest_rows

    mine = {
        StreamPosition(t["batch"], t["stream"], t["provider"], t["seq"]): t
        for t in tuples
        if readable(case, (t["stream"], t["provider"]))
    }
    return [mine[p] for p in latest_rows(mine, size)]


def expected(case: Case, tuples: list[dict], new: set[int]) -> list[dict] | set:
    """The reference's output at the instant after ingest batches ``new`` (the tuples
    stored so far): the aggregate over the window, the ids new in it (ISTREAM), or the
    pairs of the windows with a new tuple."""
    window = expected_windows(case, tuples, case.sizes[0])
    if case.kind == "aggregate":
        ids = [t["id"] for t in window]
        return [{"n": len(ids), "lo": min(ids), "hi": max(ids), "s": sum(ids)}]
    if case.kind == "selection":
        return {t["id"] for t in window if t["batch"] in new}
    right = expected_windows(case, tuples, case.sizes[1])
    return {
        (a["id"], b["id"])
        for a in window
        for b in right
        if a["k"] == b["k"] and (a["batch"] in new or b["batch"] in new)
    }


def got(case: Case, rows: Collect, before: int) -> list[dict] | set:
    batches = rows.batches[before:]
    if case.kind == "aggregate":
        return batches[-1] if batches else []
    flat = [r for b in batches for r in b]
    if case.kind == "selection":
        return {r["id"] for r in flat}
    return {(r["x"], r["y"]) for r in flat}


def random_round(rng: random.Random, first: bool, next_id: Iterator[int]) -> dict:
    """Tuples for some of Mixed's channels in one landing; the first round has a public
    one, so every query's window holds a tuple from its first instant on."""
    out = {}
    for provider in "abcd":
        count = rng.randint(0, 5)
        if first and provider == "b":
            count = max(count, 1)
        if count:
            out[(MIXED, provider)] = [(i, i % 5) for i in (next(next_id) for _ in range(count))]
    return out or {(MIXED, "b"): [(next(next_id), 0)]}


def test_every_row_window_path_agrees_with_the_reference_over_random_interleavings(
    feed,
) -> None:
    """Channels at different levels and roles, interleaved at random within and across
    ingest batches: after each batch, each query's output equals the reference's (long
    mode: more rounds, and more paths: a selection of its own, a second join's roles)."""
    rng = random.Random(20261201)
    rounds = 8 if long_mode() else 3
    cases = CASES + LONG_CASES if long_mode() else CASES
    late = LATE + LONG_LATE if long_mode() else LATE
    running: dict = {}
    ids = iter(range(1, 10**6))
    batches: set[int] = set()
    for i in range(rounds):
        before = {case: len(rows.batches) for case, (_q, rows) in running.items()}
        feed.land(random_round(rng, i == 0, ids))
        tuples = stored(feed)
        new = {t["batch"] for t in tuples} - batches
        assert len(new) == 1, "one ingest batch per round: one instant per query"
        batches |= new
        if i == 0:  # registered over the first round: none starts on an empty window
            running = {c: submit(feed, c.text, c.role, c.level, c.alone) for c in cases}
            before = dict.fromkeys(cases, 0)
        for case, (query, rows) in running.items():
            query.process_all_available()
            assert got(case, rows, before[case]) == expected(case, tuples, new), (i, case)
    for case in late:  # their first instant: the window over everything stored
        _query, rows = submit(feed, case.text, case.role, case.level, case.alone)
        assert got(case, rows, 0) == expected(case, tuples, batches), case
