"""Figs. 8-9 on Spark (paper 3): every mode gives each query the pure reference's
rows, an off operator runs no Spark job, and the bench runs end to end in quick mode."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from bench import privacy_switch_figs
from bench.prs_executor import Executor, Run, collect, frames_of_rows, random_rows
from bench.prs_networks import GeneratedNetwork, generate
from pyspark.sql import SparkSession

from streamshield.network.evaluate import evaluate, evaluate_network
from streamshield.network.switch_state import operators_off

pytestmark = pytest.mark.spark

LOST = (frozenset(), frozenset({"Q1"}), frozenset({"Q1", "Q2"}))


def bag(rows: list[dict[str, object]]) -> Counter[str]:
    """Rows as a multiset; a NULL and a missing attribute are the same (a union pads)."""
    return Counter(repr(sorted((k, v) for k, v in r.items() if v is not None)) for r in rows)


@pytest.fixture(scope="module")
def case(spark: SparkSession) -> tuple[GeneratedNetwork, dict, dict[tuple[str, frozenset], Run]]:
    """One 3-query network over small streams, run once per mode and loss pattern that a
    test below reads (each run costs several Spark jobs)."""
    rows = random_rows(60, seed=4)
    g = generate(3, 15, 0.5, seed=2)
    executor = Executor(spark, frames_of_rows(spark, rows), output=collect)
    runs = {}
    for mode, lost in [
        ("non-shared", LOST[0]),
        ("shared", LOST[0]),
        ("shared", LOST[2]),
        *(("switches", lost) for lost in LOST),
    ]:
        runs[mode, lost] = executor.run(mode, g, g.state(lost))
    return g, rows, runs


def test_every_mode_gives_each_query_the_reference_rows(case) -> None:  # type: ignore[no-untyped-def]
    g, rows, runs = case
    reference = {q: bag(evaluate(tree, rows)) for q, tree in g.queries.items()}
    assert sum(1 for r in reference.values() if r) >= 2, "data too sparse to compare"
    for (mode, lost), run in runs.items():
        assert set(run.delivered) == set(g.queries) - lost, (mode, lost)
        for query, out in run.delivered.items():
            assert bag(out) == reference[query], (mode, sorted(lost), query)  # type: ignore[arg-type]
    non_shared = runs["non-shared", LOST[0]].delivered
    assert {q: bag(o) for q, o in non_shared.items()} == reference  # type: ignore[arg-type]


def test_switches_match_the_pure_network_with_its_operators_off(case) -> None:  # type: ignore[no-untyped-def]
    g, rows, runs = case
    for lost in LOST:
        run = runs["switches", lost]
        assert run.off == operators_off(g.network, g.state(lost))
        pure = evaluate_network(g.network, rows, run.off)
        assert not set(pure.computed) & run.off
        for query, out in run.delivered.items():
            assert bag(out) == bag(pure.outputs[query])  # type: ignore[arg-type]


def test_an_off_operator_runs_no_spark_job(spark: SparkSession, case) -> None:  # type: ignore[no-untyped-def]
    """Post-filtering runs Q1's and Q2's output jobs and drops them; with switches their
    job groups get no job and no frame of an off operator is even built."""
    g, _, runs = case
    tracker = spark.sparkContext.statusTracker()
    lost = LOST[2]

    def jobs(run: Run, query: str) -> list[int]:
        return list(tracker.getJobIdsForGroup(run.groups[query]))

    post, switched = runs["shared", lost], runs["switches", lost]
    assert all(jobs(post, q) for q in g.queries), "post-filtering computes every output"
    assert post.off == frozenset() and post.built == g.network.nodes
    for query in lost:
        assert jobs(switched, query) == [], f"{query} lost every user, yet ran a job"
    assert jobs(switched, "Q3")
    assert switched.off, "losing two of three queries switches something off"
    assert not switched.built & switched.off
    assert not switched.persisted & switched.off
    assert switched.built == g.network.nodes - switched.off
    # With full access the switched network is the shared one: nothing off, all built.
    assert runs["switches", LOST[0]].built == g.network.nodes


def test_the_bench_runs_in_quick_mode(spark: SparkSession, tmp_path: Path) -> None:
    result = privacy_switch_figs.main(["--quick", "--out", str(tmp_path)])
    saved = json.loads((tmp_path / "bench" / "results" / "privacy-switches.json").read_text())
    assert saved["fig8"] == json.loads(json.dumps(result["fig8"]))
    (row8,) = saved["fig8"]["3q-15ops"].values()
    for mode in ("non-shared", "shared", "switches"):
        assert 0 < row8[mode]["min"] <= row8[mode]["median"] <= row8[mode]["max"]
    (row9,) = saved["fig9"].values()
    for series in ("post-filter", "switches, full access", "switches, 1 lost", "switches, 2 lost"):
        assert row9[series]["median"] > 0
    assert 0 < row9["operators_off_1_lost"] < row9["operators_off_2_lost"] < 1
    samples = saved["samples"]
    assert {s["figure"] for s in samples} == {"fig8", "fig9"}
    assert all(t > 0 for s in samples for ts in s["times"].values() for t in ts)
    for name in ("prs-fig8.png", "prs-fig9.png"):
        png = tmp_path / "docs" / "img" / name
        assert png.read_bytes()[:4] == b"\x89PNG" and png.stat().st_size > 10_000
    text = (tmp_path / "docs" / "experiments.md").read_text()
    assert privacy_switch_figs.MEASURED in text and "| 3q-15ops | 50% |" in text
