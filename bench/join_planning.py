"""How long the cloud-auditing self-joins (Q6, Q7) take to plan, per micro-batch.

``python -m bench.join_planning [--propagation on|off] [--queries q6,q7]``. The paper's
MessageLog (7 attributes) goes through secure ingest at the scenario's channel levels;
each join query then runs on the engine alone (no server), and its delivery does what the
server's does first: write the batch to a result store. Per batch it prints the seconds
Catalyst took to optimise the delivered frame, the seconds to plan and write it, and the
rows; at the end the analyzer/optimizer rule that took longest.

``--propagation on`` restores Spark's constraint propagation (off by default since the
joins through the server took minutes per batch, docs/chinese-wall.md, "Why the joins
were slow"): with it, ``PruneFilters`` takes nearly all of the time.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from streamshield.catalog import SqliteCatalog, StreamDefinition
from streamshield.engine.pipeline import Pipeline
from streamshield.engine.queries.streaming_queries import CallbackSink
from streamshield.engine.session import CONSTRAINT_PROPAGATION, spark_session
from streamshield.engine.store.result_store import ResultStore
from streamshield.examples import cloud_audit as ca
from streamshield.policy.level_assignment import LevelAssignment
from streamshield.policy.query_level import QueryLevel

ROLE = "CUSTOMER1"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--propagation", choices=("on", "off"), default="off")
    parser.add_argument("--queries", default="q6,q7")
    args = parser.parse_args(argv)
    on = args.propagation == "on"
    spark = spark_session(app_name="streamshield-join-planning")
    spark.sparkContext.setLogLevel("ERROR")
    spark.conf.set(CONSTRAINT_PROPAGATION, str(on).lower())
    root = Path(tempfile.mkdtemp(prefix="join-planning-"))
    pipeline = _pipeline(spark, root)
    store = ResultStore(root / "results")

    def deliver(frame, batch_id: int) -> None:
        if on:  # the join plans in its own session: carry the setting into this batch
            frame.sparkSession.conf.set(CONSTRAINT_PROPAGATION, "true")
        start = time.monotonic()
        frame._jdf.queryExecution().optimizedPlan()
        planned = time.monotonic() - start
        rows = store.write(frame, batch_id).count()
        total = time.monotonic() - start
        print(f"  batch {batch_id}: optimise {planned:.2f} s, +write {total:.2f} s, {rows} rows")

    lattice = ca.lattice()
    for query in ca.QUERIES:
        if query.name not in args.queries.split(","):
            continue
        level = QueryLevel(lattice, lattice.parse(query.level))
        start = time.monotonic()
        print(f"{query.name} at {query.level}, constraint propagation {args.propagation}:")
        handle = pipeline.cql.submit(
            pipeline.cql.admit(query.text, [ROLE], level), CallbackSink(deliver), name=query.name
        )
        handle.process_all_available()
        print(f"  registered to last row: {time.monotonic() - start:.1f} s")
        pipeline.cql.stop(query.name)
    rules = spark._jvm.org.apache.spark.sql.catalyst.rules.RuleExecutor.dumpTimeSpent()
    print("\n".join(rules.splitlines()[:8]))


def _pipeline(spark, root: Path) -> Pipeline:
    lattice = ca.lattice()
    levels = LevelAssignment(
        lattice,
        streams={ca.STREAM: lattice.parse(ca.STREAM_LEVEL)},
        channels={
            (ca.STREAM, ca.provider(c)): lattice.parse(ca.channel_level(c)) for c in ca.COMPANIES
        },
    )
    catalog = SqliteCatalog(root / "catalog.db")
    catalog.register_stream(
        StreamDefinition(ca.STREAM, tuple(tuple(a) for a in ca.ATTRIBUTES), ca.TID)
    )
    roles = ["ADMIN", ROLE, "CUSTOMER2", "INFO_PROVIDER", "OTHER"]  # as the server test's
    catalog.set_roles(roles, [])
    pipeline = Pipeline(spark, catalog, root, levels=lambda: levels)
    for company in ca.COMPANIES:
        for phase in (1, 2):
            lines = ca.wire_lines(company, phase, role=ROLE)
            assert not pipeline.landing.append_lines(lines).rejected
    pipeline.ingest_available()
    return pipeline


if __name__ == "__main__":
    main()
