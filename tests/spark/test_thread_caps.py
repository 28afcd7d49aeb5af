"""Spark's per-stage thread pools stay within the caps the session sets.

Each is a "cached" pool whose core size is its maximum (1024 for shuffle exchanges and
result stages): every stage planned starts a new thread while fewer than that exist,
idle ones included, and threads live 60 s. Unbounded by the caps, the soak's JVM grew
~100 threads a minute; many planned stages in a row must not grow a pool
past its cap.
"""

from __future__ import annotations

from collections import Counter

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from streamshield.engine.session import THREAD_CAPS

pytestmark = pytest.mark.spark

POOLS = {
    "shuffle-exchange": "spark.sql.shuffleExchange.maxThreadThreshold",
    "ResultQueryStage": "spark.sql.resultQueryStage.maxThreadThreshold",
    "broadcast-exchange": "spark.sql.broadcastExchange.maxThreadThreshold",
}


def _pool_threads(spark: SparkSession) -> Counter:
    threads = spark.sparkContext._jvm.java.lang.Thread.getAllStackTraces().keySet().toArray()
    names = [thread.getName() for thread in threads]
    return Counter(pool for name in names for pool in POOLS if name.startswith(pool))


def test_planned_stages_do_not_grow_the_pools_past_their_caps(spark) -> None:
    caps = {pool: int(spark.conf.get(key)) for pool, key in POOLS.items()}
    assert caps == {pool: int(THREAD_CAPS[key]) for pool, key in POOLS.items()}
    # More shuffles and result stages than the caps, in a row (within the pools' 60 s
    # keep-alive on an idle machine: uncapped, each would hold one thread per query).
    for i in range(caps["shuffle-exchange"] + 4):
        frame = spark.range(100).withColumn("k", F.col("id") % (i + 2))
        assert len(frame.groupBy("k").count().collect()) == i + 2
    counts = _pool_threads(spark)
    assert counts["shuffle-exchange"] >= 1  # the names are right: the pools were seen
    for pool, cap in caps.items():
        assert counts[pool] <= cap, (pool, counts[pool], cap)
