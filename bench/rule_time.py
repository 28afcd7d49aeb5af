"""Catalyst's time per rule over a landing bench run (the landing latency).

Why: the rounds of ``bench.landing_latency`` spend part of each landing in Spark's
analyzer and optimizer, per DataFrame built and per plan run; this says which rules and
how much (``RuleExecutor``'s metrics are JVM-wide, so everything the in-process server
builds in the measured rounds is counted). ``python -m bench.rule_time [--rounds N]``
prints the rounds' p50 and Spark's own table, then the seconds by kind (analysis,
optimizer, physical planning).
"""

from __future__ import annotations

import argparse
import re
from collections import Counter

from bench import landing_latency
from streamshield.engine.session import spark_session

_ROW = re.compile(r"(\S+)\s+\d+ / (\d+)\s+\d+ / \d+")


def by_kind(dump: str) -> dict[str, float]:
    """Seconds of ``RuleExecutor.dumpTimeSpent()``'s rules, by the kind of rule."""
    seconds: Counter[str] = Counter()
    for line in dump.splitlines():
        match = _ROW.match(line)
        if match is None:
            continue
        name, nanos = match.group(1), int(match.group(2))
        if ".analysis." in name or "Resolve" in name:
            kind = "analysis"
        elif ".optimizer." in name or "PushDown" in name or "Pruning" in name:
            kind = "optimizer"
        else:
            kind = "physical planning and other"
        seconds[kind] += nanos / 1e9
    return {kind: round(s, 3) for kind, s in seconds.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=12)
    args = parser.parse_args()
    spark = spark_session(app_name="streamshield-bench-rules")
    spark.sparkContext.setLogLevel("ERROR")
    rules = spark._jvm.org.apache.spark.sql.catalyst.rules.RuleExecutor
    landing_latency.measure(spark, 2, 1000, idle=0.5)  # warm: not counted
    rules.resetMetrics()
    out = landing_latency.measure(spark, args.rounds, 1000, idle=0.5)
    dump = rules.dumpTimeSpent()
    print(f"p50 {out['p50_s']} s over {args.rounds} rounds")
    print(dump)
    print(by_kind(dump))


if __name__ == "__main__":
    main()
