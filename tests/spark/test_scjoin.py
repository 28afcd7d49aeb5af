"""SCJoin on real ingest: every consumer gets exactly what the oracle allows, per plan.

Speed: secure ingest runs once for every scenario of the module, and every join of the
module (each window and each plan, the replay, the leak joins) runs once in the ``runs``
fixture, round by round with all queries of a round running at the same time; the
tests compare outputs with the oracle.
"""

from __future__ import annotations

import os
import random
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import functions as F

from streamshield.catalog.streams import StreamDefinition
from streamshield.engine.ingest.ingest import Ingest
from streamshield.engine.ingest.ingest_job import IngestJob
from streamshield.engine.queries.scjoin import JoinMode, JoinSide, SCJoin
from streamshield.engine.store.labelled_store import LabelledStore
from streamshield.examples import hospital
from streamshield.lang.cql import parse_policy
from streamshield.lang.windows import NOW, WindowSpec, range_, rows
from streamshield.policy.elements import Channel, SpElement, TupleElement
from streamshield.policy.encoding import RoleCodec
from streamshield.policy.join_policy import Strategy
from tests.conftest import long_mode
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
    """Makes elements per channel with consecutive sequence numbers."""

    def __init__(self, root) -> None:
        self.root, self.seq = root, {}
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


@dataclass
class Scenario:
    """Every group's labelled rows, ingested in ONE ingest batch, split back by group.

    A group is a join round (``0``, ``1``, ...) or a separate scenario (``leak``). Ingest
    labels a tuple from its channel's policy in force, whatever the batch boundaries
    (``test_ingest_job`` checks that), so one ingest batch gives the labels that one
    batch per round gives, for one JVM job instead of one per round.
    """

    split: Path  # <split>/<stream>/_group=<group>/ Parquet files of the labelled rows
    new_rows: dict[str, dict[str, list[dict]]]  # group -> stream -> the oracle's rows

    def feed(self, root: Path, group: str) -> LabelledStore:
        """Add a group's rows to the labelled store under ``root`` as one new batch."""
        store = LabelledStore(root)
        for stream in STREAMS:
            source = self.split / stream / f"_group={group}"
            if not source.exists():
                continue
            target = store.path(stream) / f"batch={group}"
            staging = root / "_staging"
            shutil.copytree(source, staging)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(staging, target)
        return store


def ingest_groups(spark, root: Path, landing: Landing, groups: dict[str, list]) -> Scenario:
    """Land every group, run secure ingest once, split its output by group."""
    owner = {}
    for start, (group, elements) in enumerate(groups.items()):
        land(root / "landing", elements, start)
        for e in elements:
            if isinstance(e, TupleElement):
                owner[e.channel.stream, e.channel.provider, e.seq] = group
    job = ingest_job(spark, root)
    job.start(available_now=True).awaitTermination()
    mapping = spark.createDataFrame(
        [(*key, group) for key, group in owner.items()],
        "stream string, provider string, seq bigint, _group string",
    )
    new_rows: dict = {group: {s: [] for s in STREAMS} for group in groups}
    for stream in STREAMS:
        frame = spark.read.option("recursiveFileLookup", "true").parquet(
            str(job.store.path(stream))
        )
        for row in frame.collect():
            data = row.asDict()
            new_rows[owner[stream, data["provider"], data["seq"]]][stream].append(data)
        frame.join(F.broadcast(mapping), ["stream", "provider", "seq"]).select(
            *frame.columns, "_group"
        ).write.partitionBy("_group").parquet(str(root / "split" / stream))
    assert sum(len(rows) for g in new_rows.values() for rows in g.values()) == len(owner)
    return Scenario(root / "split", new_rows)


N_ROUNDS = 3
ROUNDS = [str(r) for r in range(N_ROUNDS)]


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


def make_join(
    spark, store, root, window: WindowSpec, mode: JoinMode, name: str, active=lambda _n: True
) -> SCJoin:
    return SCJoin(
        spark,
        store,
        CODEC,
        JoinSide("a", WARD, "k", window),
        JoinSide("b", LAB, "k", window),
        root / name,
        mode,
        name=name,
        active=active,
    )


def oracle_batches(
    scenario: Scenario, window: WindowSpec, groups: list[str], consumers
) -> dict[tuple, list[list]]:
    """Per consumer, what the oracle delivers at each instant (empty ones included)."""
    oracle = JoinOracle(CODEC, OracleSide(WARD, "k", window), OracleSide(LAB, "k", window))
    expected: dict = {roles: [] for roles in consumers}
    for instant, group in enumerate(groups):
        new = scenario.new_rows[group]
        pairs = oracle.step(new["Ward"], new["Lab"], instant)
        for roles in consumers:
            expected[roles].append(oracle.deliver(pairs, roles))
    return expected


def oracle_outputs(
    scenario: Scenario, window: WindowSpec, groups: list[str], consumers
) -> dict[tuple, list[list]]:
    expected = oracle_batches(scenario, window, groups, consumers)
    return {roles: [b for b in batches if b] for roles, batches in expected.items()}


WINDOWS = {"rows": rows(2), "range": range_(90), "now": NOW}
REPLAYED = ("rows", JoinMode.ADAPTIVE)
"""The window and plan of the replay test, which also serves as that plan's case."""
PLANS = (
    [(w, mode) for w in WINDOWS for mode in JoinMode]
    if long_mode()
    else [REPLAYED, ("range", JoinMode.PF), ("now", JoinMode.FP)]
)
"""The (window, plan) pairs compared with the oracle. The suite runs each window and each
plan once (every join of a round runs at the same time on two cores, so each one more
is time); PF and FP over a ROWS window are the leak joins' plans too. Long mode runs
every pair."""


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
LEAK_MODES = (JoinMode.PF, JoinMode.FP)


def leak_elements(landing: Landing) -> list:
    """Hand-made policies, each aimed at one leak; on their own channels ("leak")."""
    elements = []
    for stream, tuples in (("Ward", ((1, 1), (2, 2))), ("Lab", ((7, 1), (8, 2)))):
        channel = Channel(stream, "leak")
        elements += landing.policy(channel, LEAK_POLICIES[stream], 10)
        elements += [landing.tuple(channel, tid, key, 5) for tid, key in tuples]
    return elements


@pytest.fixture(scope="module")
def scenario(spark, tmp_path_factory) -> Scenario:
    root = tmp_path_factory.mktemp("scjoin-scenario")
    landing = Landing(root)
    rounds = random_rounds(random.Random("scjoin"), landing, N_ROUNDS)
    groups = {**dict(zip(ROUNDS, rounds, strict=True)), "leak": leak_elements(landing)}
    return ingest_groups(spark, root, landing, groups)


@dataclass
class Case:
    """One SCJoin with its consumers' collectors and its own labelled store."""

    join: SCJoin
    store_root: Path
    collectors: dict[tuple, Collector]


@dataclass
class Runs:
    """Every join of the module, run once: the tests only compare their outputs."""

    plans: dict[tuple[str, JoinMode], Case]
    replay: Case  # also the (rows, ADAPTIVE) case: same join, crash or not, same output
    leaks: dict[JoinMode, Case]
    crash: str  # the error of the replay's crashed batch
    versions_at_crash: list[int]

    def case(self, window: str, mode: JoinMode) -> Case:
        return self.replay if (window, mode) == REPLAYED else self.plans[window, mode]


def make_case(spark, root: Path, window: WindowSpec, mode: JoinMode, name: str, consumers):
    store_root = root / name / "store"
    join = make_join(spark, LabelledStore(store_root), root / name, window, mode, name)
    fail = {CONSUMERS[-1]: 1} if name == "replay" else {}
    collectors = {roles: Collector(fail_at=fail.get(roles)) for roles in consumers}
    for roles, collector in collectors.items():
        join.subscribe(roles, collector)
    return Case(join, store_root, collectors)


@pytest.fixture(scope="module")
def runs(spark, tmp_path_factory, scenario) -> Runs:
    """All joins, round by round; within a round every query runs at the same time.

    Each SCJoin is its own streaming query (own checkpoint, state and name), so they
    can run concurrently: their driver work (planning, Python callbacks, file listing)
    overlaps instead of adding up, which is most of a small batch's time.
    """
    root = tmp_path_factory.mktemp("scjoin-runs")
    plans = {
        (w, mode): make_case(spark, root, WINDOWS[w], mode, f"{w}-{mode.value}", CONSUMERS)
        for w, mode in PLANS
        if (w, mode) != REPLAYED
    }
    replay = make_case(spark, root, WINDOWS[REPLAYED[0]], REPLAYED[1], "replay", CONSUMERS)
    leaks = {
        mode: make_case(spark, root, rows(10), mode, f"leak-{mode.value}", LEAK_CONSUMERS)
        for mode in LEAK_MODES
    }
    crash, versions = "", []
    for r, group in enumerate(ROUNDS):
        cases = [*plans.values(), replay, *(leaks.values() if r == 0 else ())]
        for case in cases:
            is_leak = any(case is leak for leak in leaks.values())
            scenario.feed(case.store_root, "leak" if is_leak else group)
        queries = [(case, case.join.start(available_now=True)) for case in cases]
        for case, query in sorted(queries, key=lambda cq: cq[0] is not replay):
            try:
                query.awaitTermination()
            except StreamingQueryException as error:
                if case is not replay or r != 1:
                    raise
                # batch 1 died after its windows were written; one side's version is
                # even lost: the restarted query recomputes it from batch 0's state
                crash, versions = str(error), replay.join.windows[0].versions()
                shutil.rmtree(replay.join.windows[0].directory / "v=1")
                replay.join.start(available_now=True).awaitTermination()
    return Runs(plans, replay, leaks, crash, versions)


@pytest.mark.parametrize("window", list(WINDOWS))
def test_every_plan_delivers_what_the_oracle_allows(scenario, runs, window) -> None:
    expected = oracle_outputs(scenario, WINDOWS[window], ROUNDS, CONSUMERS)
    assert sum(len(b) for b in expected.values()) >= 2, "the scenario joins too little"
    modes = [mode for w, mode in PLANS if w == window]
    assert modes, window
    for mode in modes:
        case = runs.case(window, mode)
        for roles in CONSUMERS:
            assert case.collectors[roles].nonempty() == expected[roles], (mode, roles)
        join = case.join
        assert len(join.stats) == N_ROUNDS
        assert join.stats[-1].window_sizes[0] > 0
        if mode is not JoinMode.ADAPTIVE:
            assert set(join.last_stats.strategies.values()) == {Strategy(mode.value)}


def test_replayed_batch_recomputes_the_same_output(scenario, runs) -> None:
    """Batch 1 dies after its windows were written; one side's version is even lost.
    The restarted query replays batch 1 from batch 0's state: same output as the oracle."""
    assert "simulated crash" in runs.crash
    assert runs.versions_at_crash == [0, 1]
    expected = oracle_outputs(scenario, WINDOWS[REPLAYED[0]], ROUNDS, CONSUMERS)
    for roles in CONSUMERS:
        assert runs.replay.collectors[roles].nonempty() == expected[roles], roles
    join = runs.replay.join
    assert [s.batch_id for s in join.stats] == [0, 1, 2]
    assert join.windows[0].versions() == [1, 2], "old versions are pruned"


@pytest.mark.parametrize("mode", LEAK_MODES)
def test_one_shared_join_gives_each_consumer_only_its_own(scenario, runs, mode) -> None:
    case = runs.leaks[mode]
    expected = oracle_outputs(scenario, rows(10), ["leak"], LEAK_CONSUMERS)
    for roles, pairs in LEAK_CONSUMERS.items():
        got = case.collectors[roles].nonempty()
        assert got == expected[roles], roles
        assert {(a[0], b[0]) for batch in got for a, b, _r, _d in batch} == pairs, roles
    gp = [row for batch in case.collectors[("GP",)].nonempty() for row in batch]
    assert all(a[2] is None and a[1] is not None and b[3] is not None for a, b, _r, _d in gp)
    c = [row for batch in case.collectors[("C",)].nonempty() for row in batch]
    assert all(a[2] is not None for a, _b, _r, _d in c)
    assert case.join.last_stats.joined_rows == 2, "the join ran once for all consumers"


# -- privacy switches: a subscription is a switched branch ----------------------------------

SWITCHED_WINDOW = rows(10)  # keeps round 1's tuples, so round 2 joins against them
SWITCHED = {"kept": ("C",), "toggled": ("GP",)}  # one join: toggled is off in round 1
DARK = {"dark_c": ("C",), "dark_gp": ("GP",)}  # another: every subscription off in round 1
OFF_IN = {"toggled": {1}, "dark_c": {1}, "dark_gp": {1}}
"""The rounds in which a subscription's privacy switch is off (on in every other)."""


@dataclass
class Switched:
    """Two joins run round by round with switches (``OFF_IN``), and the Spark jobs each
    job group of theirs started in each round."""

    cases: dict[str, Case]
    collectors: dict[str, Collector]  # by subscription name
    jobs: list[dict[str, set[int]]]  # per round: job group -> the jobs it started


@pytest.fixture(scope="module")
def switched(spark, tmp_path_factory, scenario) -> Switched:
    """Both joins run each round at the same time, apart from the module's other joins:
    Spark keeps only the newest 100 jobs' status, which every join of ``runs`` at once
    would push out before a round's job groups are read."""
    root = tmp_path_factory.mktemp("scjoin-switched")
    now = [0]

    def active(name: str) -> bool:
        return now[0] not in OFF_IN.get(name, ())

    cases, collectors = {}, {}
    for name, subscribers in (("switched", SWITCHED), ("dark", DARK)):
        join = make_join(
            spark,
            LabelledStore(root / name / "store"),
            root,
            SWITCHED_WINDOW,
            JoinMode.ADAPTIVE,
            name,
            active,
        )
        for sub, roles in subscribers.items():
            collectors[sub] = Collector()
            join.subscribe(roles, collectors[sub], name=sub)
        cases[name] = Case(join, root / name / "store", {})
    tracker = spark.sparkContext.statusTracker()
    groups = [
        f"{name}:{part}"
        for name, subscribers in (("switched", SWITCHED), ("dark", DARK))
        for part in (*subscribers, "node:windows", "node:pairs")
    ]
    seen = {g: set(tracker.getJobIdsForGroup(g)) for g in groups}
    jobs = []
    for r, group in enumerate(ROUNDS):
        now[0] = r
        for case in cases.values():
            scenario.feed(case.store_root, group)
        for query in [case.join.start(available_now=True) for case in cases.values()]:
            query.awaitTermination()
        ids = {g: set(tracker.getJobIdsForGroup(g)) for g in groups}
        jobs.append({g: ids[g] - seen[g] for g in groups})
        seen = ids
    return Switched(cases, collectors, jobs)


def test_a_switched_off_subscription_runs_no_job_and_the_other_is_unchanged(
    scenario, switched
) -> None:
    """Toggled is off in round 1: no job in its group, no callback; kept gets every
    round exactly; toggled, on again, gets round 2's new pairs at once, exactly, and never
    round 1's (pairs new at an instant nobody may receive are never computed)."""
    expected = oracle_batches(scenario, SWITCHED_WINDOW, ROUNDS, SWITCHED.values())
    kept, toggled = switched.collectors["kept"], switched.collectors["toggled"]
    assert [kept.batches.get(r, []) for r in range(N_ROUNDS)] == expected[SWITCHED["kept"]]
    assert sorted(toggled.batches) == [0, 2], "no callback while its switch is off"
    assert toggled.batches[2] == expected[SWITCHED["toggled"]][2], "resumed in one batch"
    assert toggled.batches[0] == expected[SWITCHED["toggled"]][0]
    assert expected[SWITCHED["toggled"]][1] and expected[SWITCHED["toggled"]][2], "too few"
    off, on = switched.jobs[1]["switched:toggled"], switched.jobs[1]["switched:kept"]
    assert off == set() and on, "an off subscription runs no Spark job"
    assert switched.jobs[2]["switched:toggled"], "on again: it runs"
    join = switched.cases["switched"].join
    assert [s.computed for s in join.stats] == [("kept", "toggled"), ("kept",), ("kept", "toggled")]


def test_with_every_subscription_off_no_pair_is_computed_but_the_windows_move_on(
    scenario, switched
) -> None:
    """Round 1 with both switches off: the windows take its tuples (their job group
    runs), the pairs' and the subscriptions' run nothing; at round 2 both get exactly the
    pairs new then, joined against windows that hold round 1's tuples."""
    expected = oracle_batches(scenario, SWITCHED_WINDOW, ROUNDS, DARK.values())
    for name, roles in DARK.items():
        got = switched.collectors[name].batches
        assert sorted(got) == [0, 2], name
        assert [got[0], got[2]] == [expected[roles][0], expected[roles][2]], name
        assert switched.jobs[1][f"dark:{name}"] == set(), name
    assert switched.jobs[1]["dark:node:pairs"] == set(), "no pair computed for nobody"
    assert switched.jobs[1]["dark:node:windows"], "the windows took round 1's tuples"
    assert switched.jobs[2]["dark:node:pairs"]
    dark, lit = switched.cases["dark"].join.stats, switched.cases["switched"].join.stats
    assert dark[1].computed == () and dark[1].joined_rows == 0
    assert [s.window_sizes for s in dark] == [s.window_sizes for s in lit]
