"""Run secure ingest on a given Spark master and write the per-role outcomes as JSON.

    python -m tests.cluster.run_pipeline --master URL --out FILE --landing DIR --root DIR

Its own process, because a process holds one SparkContext and the test session already
has a local one. Driver and executors share nothing but ``--landing`` and ``--root``
(absolute paths on storage both can reach): all shield state lives under ``--root``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from pathlib import Path

from streamshield.engine.ingest.ingest import Ingest
from streamshield.engine.ingest.ingest_job import IngestJob
from streamshield.engine.session import spark_session
from streamshield.examples import hospital
from tests.spark.conformance import STREAMS, Outcome, spark_outcome, stored

ROLE_SETS = [["C"], ["GP"], ["ND"], ["ER"], ["INS"]]


def to_json(outcome: Outcome) -> dict[str, list]:
    """An outcome as JSON: ``stream/provider/seq`` keys, attribute sets as sorted lists."""
    return {
        "/".join(map(str, key)): [reason, sorted(attributes), policy]
        for key, (reason, attributes, policy) in sorted(outcome.items())
    }


def role_key(roles: Iterable[str]) -> str:
    return ",".join(roles)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--master", required=True)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--landing", required=True, type=Path)
    parser.add_argument("--root", required=True, type=Path)
    parser.add_argument("--max-files", type=int, help="files per micro-batch (default: all)")
    args = parser.parse_args(argv)
    # relative paths would resolve against each process's own working directory
    landing, root = args.landing.resolve(), args.root.resolve()

    spark = spark_session(args.master, "streamshield-cluster-test")
    spark.sparkContext.setLogLevel("ERROR")
    try:
        ingest = Ingest(spark, hospital.hierarchy(), STREAMS, hospital.server_policies())
        job = IngestJob(ingest, landing, root)
        job.start(available_now=True, max_files=args.max_files).awaitTermination()
        frames = stored(spark, job.store)
        result = {
            "master": spark.sparkContext.master,
            "executors": _executors(spark),
            "outcomes": {role_key(r): to_json(spark_outcome(frames, r)) for r in ROLE_SETS},
        }
    finally:
        spark.stop()
    args.out.write_text(json.dumps(result, indent=1, sort_keys=True))


def _executors(spark) -> list[str]:
    """The ids of the application's executors, the driver excluded: empty in local mode."""
    sc = spark.sparkContext
    ids = sc._jvm.scala.jdk.javaapi.CollectionConverters.asJava(sc._jsc.sc().getExecutorIds())
    return sorted(str(i) for i in ids)


if __name__ == "__main__":
    main()
