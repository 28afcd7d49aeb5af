"""Where the secured scan's time goes, arm by arm, with the old layout and the current one.

``python -m bench.scan_experiment TUPLES COPIES ROUNDS``: one ingest (the current code:
summaries, files sorted by lo, small pages), an "old" store rewritten from it as ingest
wrote before (no summaries, rows in (provider, seq) order, Parquet's default pages) and
the plain copy; then streaming no-op scans of every arm, interleaved (a rotating order,
one untimed run each first), a row check of old vs new views, and what the summaries and
the sort add to a write of the labelled rows. Run it under ``flock /tmp/bench.lock``.
Arms: ``old``/``new`` the secured view over either store; ``new_nomask`` the tuple test
without masks; ``new_data_only`` the new files read without labels (what the sort and the
small pages cost the data columns).
"""

from __future__ import annotations

import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from pyspark.sql import functions as F

from bench.experiment_common import link_copies, run_noop
from bench.secured_scan import load, plain_copy
from bench.workload import STREAM, hierarchy, write_landing
from streamshield.engine.ingest.ingest import Ingest
from streamshield.engine.ingest.ingest_job import IngestJob
from streamshield.engine.session import spark_session
from streamshield.engine.store.labelled_store import labelled_schema, read_batches, read_stream
from streamshield.engine.views import labels, scan_summary
from streamshield.engine.views.secured_view import secured_view
from streamshield.policy.encoding import RoleCodec


def main() -> None:
    tuples, copies, rounds = (int(x) for x in sys.argv[1:4])
    spark = spark_session(app_name="scan-exp")
    spark.sparkContext.setLogLevel("ERROR")
    work = Path(tempfile.mkdtemp(prefix="scan-exp-"))
    print("load", load(), flush=True)
    try:
        landing = write_landing(work / "landing", tuples, 100, 64)
        job = IngestJob(Ingest(spark, hierarchy(64), {STREAM.name: STREAM}), landing, work / "ss")
        job.start(available_now=True).awaitTermination()
        new = job.store.path(STREAM.name)
        codec = RoleCodec(hierarchy(64))
        struct = labelled_schema(spark, STREAM.ddl, len(STREAM.names), codec.width, summaries=True)
        files = sorted(new.rglob("*.parquet"))
        old = work / "old"
        for n, file in enumerate(files):
            rows = spark.read.parquet(str(file)).coalesce(1)
            rows = rows.drop(*(f.name for f in scan_summary.FIELDS))
            rows.sortWithinPartitions("provider", "seq").write.parquet(str(old / f"f{n:04d}"))
        plain = plain_copy(spark, old, work / "plain")
        print(json.dumps({"files": len(files), "rows": tuples}), flush=True)
        dirs = {
            "new": link_copies(new, work / "xn", copies),
            "old": link_copies(old, work / "xo", copies),
            "plain": link_copies(plain, work / "xp", copies),
        }
        plain_schema = spark.read.parquet(str(dirs["plain"])).schema

        def src(kind):
            if kind != "plain":
                return read_stream(spark, struct, dirs[kind])
            reader = spark.readStream.schema(plain_schema).option("recursiveFileLookup", "true")
            return reader.parquet(str(dirs[kind]))

        def no_mask(kind, roles):
            return src(kind).filter(labels.allows(0, codec.query(roles)))

        every = [f"r{i:03d}" for i in range(64)]
        arms = {
            "every": {
                "plain": lambda: src("plain"),
                "old": lambda: secured_view(src("old"), STREAM, codec, every),
                "new": lambda: secured_view(src("new"), STREAM, codec, every),
                "new_nomask": lambda: no_mask("new", every),
                "new_data_only": lambda: src("new"),
            },
            "few": {
                "plain": lambda: src("plain"),
                "old": lambda: secured_view(src("old"), STREAM, codec, ["r000"]),
                "new": lambda: secured_view(src("new"), STREAM, codec, ["r000"]),
                "old_r040": lambda: secured_view(src("old"), STREAM, codec, ["r040"]),
                "new_r040": lambda: secured_view(src("new"), STREAM, codec, ["r040"]),
            },
        }
        sel = F.col("value") > 50
        for case, arm in arms.items():
            built = {k: (lambda f=f: f().filter(sel).select("id", "value")) for k, f in arm.items()}
            for k, f in built.items():
                run_noop(f(), work / "warm" / case / k)
            times = {k: [] for k in built}
            ks = list(built)
            for i in range(rounds):
                for k in ks[i % len(ks) :] + ks[: i % len(ks)]:
                    times[k].append(run_noop(built[k](), work / case / f"{k}{i}"))
            res = {}
            for k in ks:
                r = [p / s for p, s in zip(times["plain"], times[k], strict=True)]
                res[k] = {
                    "median_s": round(statistics.median(times[k]), 3),
                    "ratio": round(statistics.median(r), 3),
                    "min": round(min(r), 3),
                    "max": round(max(r), 3),
                }
            print(json.dumps({case: res}), flush=True)
        batch_new, batch_old = (read_batches(spark, struct, [d]) for d in (new, old))
        for roles in (["r000"], ["r040"], every):
            a = secured_view(batch_old, STREAM, codec, roles).filter(sel).count()
            b = secured_view(batch_new, STREAM, codec, roles).filter(sel).count()
            print("check", roles[:2], a, b, flush=True)
        # what the summaries and the sort add to ingest's write of the labelled rows
        base = batch_old.drop(*(f.name for f in scan_summary.FIELDS)).cache()
        base.count()
        writes = {
            "write_before": lambda: base,
            "write_summaries_sorted": lambda: scan_summary.with_scan_summary(
                base, codec.block_width
            ),
        }
        spent = {k: [] for k in writes}
        for i in range(rounds):
            for k, f in writes.items() if i % 2 == 0 else reversed(writes.items()):
                began = time.perf_counter()
                f().write.option("parquet.page.row.count.limit", 2000).parquet(
                    str(work / "w" / f"{k}{i}")
                )
                spent[k].append(time.perf_counter() - began)
        print(json.dumps({k: sorted(round(x, 3) for x in v) for k, v in spent.items()}))
        print("load", load(), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
