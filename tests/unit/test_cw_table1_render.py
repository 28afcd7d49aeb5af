"""bench.cw_table1's table and plot from a result (no Spark): the pooled overhead per
experiment with its interval and its verdict against the overhead targets (2%; 5%
for the join), beside the paper's stated ranges."""

from __future__ import annotations

import random
from pathlib import Path

from bench import cw_table1
from bench.paired_ratio import overhead


def result(overhead_pct: dict[int, float], rounds: int = 8) -> dict:
    rng = random.Random(3)
    rows = []
    for e in cw_table1.EXPERIMENTS:
        for n in (100_000, 250_000) if e.number == 6 else (2_000_000, 10_000_000):
            vanilla = [rng.uniform(1.4, 1.6) for _ in range(rounds)]
            level = [
                v * (1 + overhead_pct[e.number] / 100) * rng.lognormvariate(0, 0.01)
                for v in vanilla
            ]
            row = {"experiment": e.number, "query": e.query, "level": e.level, "tuples": n}
            row |= {"output_rows": {"level": 7}, "reps": 3}
            row |= {"vanilla_cpu_s": vanilla, "level_cpu_s": level}
            row |= {"vanilla_s": vanilla, "level_s": level}
            for name in ("overhead", "cpu_overhead"):
                o = overhead(level, vanilla)
                row[f"level_{name}"] = o.as_dict() | {
                    "verdict": o.verdict(cw_table1.TARGET_PCT[e.number])
                }
            rows.append(row)
    return {
        "command": "python -m bench.cw_table1",
        "started": "s",
        "finished": "f",
        "load_before_after": ["1.0 1.0 1.0", "1.0 1.0 1.0"],
        "rounds": rounds,
        "cpu_per_sample_s": 1.5,
        "arms": ["vanilla", "level"],
        "sizes": [2_000_000, 10_000_000],
        "join_sizes": [100_000, 250_000],
        "paper_overhead_pct_from_text": {str(k): list(v) for k, v in cw_table1.PAPER.items()},
        "rows": rows,
        "pooled": {"level": cw_table1.pooled(rows)},
    }


def test_verdicts_follow_the_interval_and_each_target(tmp_path: Path) -> None:
    # Exp 6's target is 5%: 3% meets it there, where it misses 2% elsewhere
    got = result({1: 0.0, 2: 0.5, 3: 2.0, 4: 3.0, 5: 10.0, 6: 3.0})
    pooled = got["pooled"]["level"]
    verdicts = {int(k): v["verdict"] for k, v in pooled.items()}
    assert verdicts == {
        1: "met",
        2: "met",
        3: "not resolved",
        4: "not met",
        5: "not met",
        6: "met",
    }
    five = pooled["5"]
    assert 9 < five["low"] <= five["pct"] <= five["high"] < 11 and five["pairs"] == 16
    table = cw_table1.markdown(got)
    assert "| 3 | Q3 at [⊥, B] | 2% |" in table and "**not resolved**" in table
    assert "| 6 | Q6 at [1, B] | 5% |" in table and "0.081-0.218" in table
    assert table.count("| 3 x 8 |") == 12  # reps x rounds of every size
    png = cw_table1.plot(got, tmp_path / "t.png")
    assert png.read_bytes()[:4] == b"\x89PNG"
