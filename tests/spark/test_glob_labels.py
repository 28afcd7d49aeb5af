"""The Java regex ingest uses for tuple-id globs: same answers as the Python matcher, and
linear time on the adversarial shapes (docs/security.md, "No input can stall the system")."""

from __future__ import annotations

import random
import time

from pyspark.sql import functions as F

from streamshield.engine.views.labels import glob_regex
from streamshield.policy.sp_patterns import glob_match


def test_glob_regex_in_spark_equals_the_python_matcher(spark) -> None:
    rng = random.Random(5)
    rows = []
    while len(rows) < 400:
        glob = "".join(rng.choice("ab*?.-") for _ in range(rng.randint(1, 7)))
        if "*" in glob or "?" in glob:
            tid = "".join(rng.choice("ab.-\n") for _ in range(rng.randint(0, 8)))
            rows.append((glob, tid, glob_regex(glob)))
    adversarial = ["*a*a*a*a*a*a*b", "a*a*a*a*a*a*a*a*c", "*?*?*?*?*?*?*?*-", "?a" * 64]
    rows += [(g, "a" * 20_000, glob_regex(g)) for g in adversarial]
    frame = spark.createDataFrame(rows, "glob string, tid string, regex string")
    started = time.perf_counter()
    got = frame.select("glob", "tid", F.expr("regexp_like(tid, regex)").alias("hit")).collect()
    elapsed = time.perf_counter() - started
    assert len(got) == len(rows)
    for row in got:
        assert row.hit is glob_match(row.glob, row.tid), (row.glob, row.tid[:20])
    assert elapsed < 30  # seconds on a loaded 2-core box; a backtracking regex never returns
