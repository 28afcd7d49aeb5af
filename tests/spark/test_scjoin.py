"""SCJoin on real ingest: every consumer gets exactly what the oracle allows, per plan."""

from __future__ import annotations

import os
import random
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException

from streamshield.catalog.streams import StreamDefinition
from streamshield.engine.ingest import Ingest
from streamshield.engine.ingest_job import IngestJob
from streamshield.engine.labelled_store import LabelledStore
from streamshield.engine.scjoin import JoinMode, JoinSide, SCJoin
from streamshield.examples import hospital
from streamshield.lang.cql import parse_policy
from streamshield.lang.windows import NOW, WindowSpec, range_, rows
from streamshield.policy.elements import Channel, SpElement, TupleElement
from streamshield.policy.encoding import RoleCodec
from streamshield.policy.join_policy import Strategy
from tests.spark.join_oracle import JoinOracle, OracleSide
from tests.spark.test_ingest_job import land

pytestmark = pytest.mark.spark

WARD = StreamDefinition(
    "Ward",
    (("id", "bigint"), ("k", "bigint"), ("hr", "double"), ("ts", "timestamp")),
    "id",
    "ts",
)
LAB = StreamDefinition(
    "Lab",
    (("id", "bigint"), ("k", "bigint"), ("x", "double"), ("ts", "timestamp")),
    "id",
    "ts",
)
STREAMS = {"Ward": WARD, "Lab": LAB}
HIERARCHY = hospital.hierarchy()
CODEC = RoleCodec(HIERARCHY)
CONSUMERS = (("C",), ("GP",), ("ND", "ER"))
START = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
VALUE = {"Ward": "hr", "Lab": "x"}


class Landing:
    """Writes rounds of elements per channel with consecutive sequence numbers."""

    def __init__(self, root) -> None:
        self.root, self.seq, self.round = root, {}, 0
        self.declared: dict = {}

    def policy(self, channel: Channel, text: str, ts: int) -> list:
        policy = parse_policy(text, ts=ts)
        self.declared[channel] = (ts, policy.csn)
        return [SpElement(channel, self._next(channel), sp) for sp in policy.sps]

    def tuple(self, channel: Channel, tid: int, key: int | None, second: int) -> TupleElement:
        ts, csn = self.declared.get(channel, (1, 1))
        stamp = (START + timedelta(seconds=second)).strftime("%Y-%m-%dT%H:%M:%SZ")
        values = {"id": tid, "k": key, VALUE[channel.stream]: tid / 4, "ts": stamp}
        return TupleElement(channel, self._next(channel), tid, ts, csn, values)

    def _next(self, channel: Channel) -> int:
        self.seq[channel] = self.seq.get(channel, 0) + 1
        return self.seq[channel]

    def land(self, elements: list) -> None:
        land(self.root / "landing", elements, self.round)
        self.round += 1


def random_policy(rng: random.Random, stream: str) -> str:
    value = VALUE[stream]
    templates = [
        "DDP = STREAMS: {s}, SRP = rbac:{r}",
        "DDP = TUPLES: [{lo}, {hi}], SRP = rbac:{r}",
        "DDP = ATTRIBUTES: {{id, {v}}}, SRP = rbac:{r}",
        "DDP = ATTRIBUTES: {{id, k}}, SRP = rbac:{r}",
        "DDP = TUPLES: {t}, SRP = rbac:{r}, SIGN = NEGATIVE",
        "DDP = ATTRIBUTES: k, SRP = rbac:{r}, SIGN = NEGATIVE",
    ]
    weights = [4, 3, 2, 2, 1, 1]
    lines = []
    for _ in range(rng.randint(1, 3)):
        template = rng.choices(templates, weights)[0]
        lo = rng.randint(100, 120)
        body = template.format(
            s=stream,
            r=rng.choice(["C", "GP", "D", "ND", "ER", "E"]),
            lo=lo,
            hi=lo + rng.randint(5, 20),
            v=value,
            t=rng.randint(100, 130),
        )
        lines.append(f"INSERT SP INTO STREAM {stream} LET {body}")
    return ";\n".join(lines)


def random_rounds(rng: random.Random, landing: Landing, n_rounds: int) -> list[list]:
    channels = [Channel("Ward", "p1"), Channel("Ward", "p2"), Channel("Lab", "p1")]
    rounds, ts = [], 100
    for r in range(n_rounds):
        elements = []
        for channel in channels:
            if r == 0 or rng.random() < 0.5:
                ts += 1
                elements += landing.policy(channel, random_policy(rng, channel.stream), ts)
            for _ in range(rng.randint(2, 4)):
                key = rng.choice([1, 2, 3, None] if rng.random() < 0.1 else [1, 2, 3])
                # event time mostly grows by round, sometimes arrives late
                second = r * 60 + rng.randint(0, 50) - (100 if rng.random() < 0.15 else 0)
                elements.append(landing.tuple(channel, rng.randint(100, 130), key, max(second, 0)))
        rounds.append(elements)
    return rounds


def ingest_job(spark, root) -> IngestJob:
    ingest = Ingest(spark, HIERARCHY, STREAMS, {})
    return IngestJob(ingest, root / "landing", root / "store")


def batch_dirs(store: LabelledStore) -> set[Path]:
    return {d for s in STREAMS if store.path(s).exists() for d in store.path(s).iterdir()}


@dataclass
class Scenario:
    """Labelled batches of each round, ingested once, fed to every join round by round."""

    rounds: list[list[Path]]  # labelled batch directories per round
    new_rows: list[dict[str, list[dict]]]  # the oracle's input per round

    def feed(self, root: Path, rounds: range) -> LabelledStore:
        store = LabelledStore(root)
        for r in rounds:
            for directory in self.rounds[r]:
                target = store.path(directory.parent.name) / directory.name
                staging = root / "_staging"
                shutil.copytree(directory, staging)
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(staging, target)
        return store


def ingest_rounds(spark, root: Path, rounds: list[list]) -> Scenario:
    landing = Landing(root)
    job = ingest_job(spark, root)
    dirs, new_rows, seen = [], [], set()
    for elements in rounds:
        landing.land(elements)
        before = batch_dirs(job.store)
        job.start(available_now=True).awaitTermination()
        added = sorted(batch_dirs(job.store) - before)
        dirs.append(added)
        fresh: dict = {s: [] for s in STREAMS}
        for directory in added:
            frame = spark.read.parquet(str(directory))
            for row in frame.collect():
                assert (row["stream"], row["provider"], row["seq"]) not in seen
                seen.add((row["stream"], row["provider"], row["seq"]))
                fresh[row["stream"]].append(row.asDict())
        new_rows.append(fresh)
    return Scenario(dirs, new_rows)


@pytest.fixture(scope="module")
def scenario(spark, tmp_path_factory) -> Scenario:
    root = tmp_path_factory.mktemp("scjoin-scenario")
    rng = random.Random("scjoin")
    return ingest_rounds(spark, root, random_rounds(rng, Landing(root), N_ROUNDS))


N_ROUNDS = 3


class Collector:
    def __init__(self, fail_at: int | None = None) -> None:
        self.batches: dict[int, list] = {}
        self.fail_at = fail_at

    def __call__(self, frame, batch_id: int) -> None:
        if batch_id == self.fail_at:
            self.fail_at = None
            raise RuntimeError("simulated crash after the window state was written")
        self.batches[batch_id] = sorted((as_tuple(r) for r in frame.collect()), key=repr)

    def nonempty(self) -> list[list]:
        return [rows for _, rows in sorted(self.batches.items()) if rows]


def as_tuple(row) -> tuple:
    return (
        tuple(row["a"]),
        tuple(row["b"]),
        tuple(row[f"_ss_r0_{w}"] for w in range(CODEC.width)),
        tuple(row[f"_ss_d0_{w}"] for w in range(CODEC.width)),
    )


def make_join(spark, store, root, window: WindowSpec, mode: JoinMode, name: str) -> SCJoin:
    return SCJoin(
        spark,
        store,
        CODEC,
        JoinSide("a", WARD, "k", window),
        JoinSide("b", LAB, "k", window),
        root / name,
        mode,
        name=name,
    )


def oracle_outputs(scenario: Scenario, window: WindowSpec) -> dict[tuple, list[list]]:
    oracle = JoinOracle(CODEC, OracleSide(WARD, "k", window), OracleSide(LAB, "k", window))
    expected: dict = {roles: [] for roles in CONSUMERS}
    for instant, new in enumerate(scenario.new_rows):
        pairs = oracle.step(new["Ward"], new["Lab"], instant)
        for roles in CONSUMERS:
            expected[roles].append(oracle.deliver(pairs, roles))
    return {roles: [b for b in batches if b] for roles, batches in expected.items()}


WINDOWS = {"rows": rows(2), "range": range_(90), "now": NOW}


@pytest.mark.parametrize("window", list(WINDOWS))
def test_every_plan_delivers_what_the_oracle_allows(spark, tmp_path, scenario, window) -> None:
    joins, collectors = {}, {}
    for mode in JoinMode:
        store = LabelledStore(tmp_path / mode.value / "store")
        join = make_join(spark, store, tmp_path / mode.value, WINDOWS[window], mode, "j")
        for roles in CONSUMERS:
            collectors[mode, roles] = Collector()
            join.subscribe(roles, collectors[mode, roles])
        joins[mode] = join
    for r in range(N_ROUNDS):
        for mode, join in joins.items():
            scenario.feed(tmp_path / mode.value / "store", range(r, r + 1))
            join.start(available_now=True).awaitTermination()
    expected = oracle_outputs(scenario, WINDOWS[window])
    assert sum(len(b) for b in expected.values()) >= 2, "the scenario joins too little"
    for mode in JoinMode:
        for roles in CONSUMERS:
            assert collectors[mode, roles].nonempty() == expected[roles], (mode, roles)
    for mode, join in joins.items():
        assert len(join.stats) == N_ROUNDS
        assert join.stats[-1].window_sizes[0] > 0
        if mode is not JoinMode.ADAPTIVE:
            assert set(join.last_stats.strategies.values()) == {Strategy(mode.value)}


def test_replayed_batch_recomputes_the_same_output(spark, tmp_path, scenario) -> None:
    """Batch 1 dies after its windows were written; one side's version is even lost.
    The restarted query replays batch 1 from batch 0's state: same output as the oracle."""
    window = WINDOWS["rows"]
    store = LabelledStore(tmp_path / "store")
    join = make_join(spark, store, tmp_path, window, JoinMode.ADAPTIVE, "replay")
    collectors = {
        roles: Collector(fail_at=1 if roles == CONSUMERS[-1] else None) for roles in CONSUMERS
    }
    for roles in CONSUMERS:
        join.subscribe(roles, collectors[roles])
    scenario.feed(tmp_path / "store", range(0, 1))
    join.start(available_now=True).awaitTermination()
    scenario.feed(tmp_path / "store", range(1, 2))
    with pytest.raises(StreamingQueryException, match="simulated crash"):
        join.start(available_now=True).awaitTermination()
    assert join.windows[0].versions() == [0, 1]
    shutil.rmtree(join.windows[0].directory / "v=1")  # lost: recomputed from version 0
    for r in range(1, N_ROUNDS):
        if r > 1:
            scenario.feed(tmp_path / "store", range(r, r + 1))
        join.start(available_now=True).awaitTermination()
    expected = oracle_outputs(scenario, window)
    for roles in CONSUMERS:
        assert collectors[roles].nonempty() == expected[roles], roles
    assert [s.batch_id for s in join.stats] == [0, 1, 2]
    assert join.windows[0].versions() == [1, 2], "old versions are pruned"


LEAK_POLICIES = {
    "Ward": """
INSERT SP INTO STREAM Ward LET DDP = STREAMS: Ward, SRP = rbac:{C, ER, INS};
INSERT SP INTO STREAM Ward LET DDP = ATTRIBUTES: {id, hr}, SRP = rbac:ND;
INSERT SP INTO STREAM Ward LET DDP = ATTRIBUTES: {id, k}, SRP = rbac:GP
""",
    "Lab": """
INSERT SP INTO STREAM Lab LET DDP = STREAMS: Lab, SRP = rbac:{C, ND, GP, ER};
INSERT SP INTO STREAM Lab LET DDP = TUPLES: 7, SRP = rbac:ER, SIGN = NEGATIVE
""",
}
LEAK_CONSUMERS = {
    ("C",): {(1, 7), (2, 8)},
    ("ER",): {(2, 8)},  # denied on one side: Lab tuple 7
    ("ND",): set(),  # join key masked on one side: Ward's k
    ("GP",): {(1, 7), (2, 8)},  # ... but hr is masked
    ("INS",): set(),  # readable on one side only
    ("INS", "ND"): set(),  # one role reads Ward, another Lab: no single role reads both
}


@pytest.fixture(scope="module")
def leak_scenario(spark, tmp_path_factory) -> Scenario:
    root = tmp_path_factory.mktemp("scjoin-leaks")
    landing = Landing(root)
    elements = []
    for stream, tuples in (("Ward", ((1, 1), (2, 2))), ("Lab", ((7, 1), (8, 2)))):
        channel = Channel(stream, "p1")
        elements += landing.policy(channel, LEAK_POLICIES[stream], 10)
        elements += [landing.tuple(channel, tid, key, 5) for tid, key in tuples]
    return ingest_rounds(spark, root, [elements])


@pytest.mark.parametrize("mode", [JoinMode.PF, JoinMode.FP])
def test_one_shared_join_gives_each_consumer_only_its_own(
    spark, tmp_path, leak_scenario, mode
) -> None:
    store = leak_scenario.feed(tmp_path / "store", range(1))
    join = make_join(spark, store, tmp_path, rows(10), mode, "leaks")
    collectors = {roles: Collector() for roles in LEAK_CONSUMERS}
    for roles, collector in collectors.items():
        join.subscribe(roles, collector)
    join.start(available_now=True).awaitTermination()
    for roles, pairs in LEAK_CONSUMERS.items():
        got = [row for batch in collectors[roles].nonempty() for row in batch]
        assert {(a[0], b[0]) for a, b, _r, _d in got} == pairs, roles
    gp = [row for batch in collectors[("GP",)].nonempty() for row in batch]
    assert all(a[2] is None and a[1] is not None and b[3] is not None for a, b, _r, _d in gp)
    c = [row for batch in collectors[("C",)].nonempty() for row in batch]
    assert all(a[2] is not None for a, _b, _r, _d in c)
    assert join.last_stats.joined_rows == 2, "the join ran once for all consumers"
