"""The scan summaries ingest writes (engine/views/scan_summary.py) change no secured view's rows.

A stream of 130 roles (a READ block of three words, so bits 63 and 64 and negative words
occur) with attribute-level policies goes through real secure ingest. Every row's
summaries must be what its label words say, every file sorted by ``lo``, and the secured
view, with its range test pushed to Parquet, must
return exactly the rows and NULLs an independent test over the words gives, for roles at
the edges of each word; files written before the summaries existed must read the same.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from bench.workload import STREAM, hierarchy, write_landing
from pyspark.sql import DataFrame, SparkSession

from streamshield.engine.ingest.ingest import Ingest
from streamshield.engine.ingest.ingest_job import IngestJob
from streamshield.engine.store.labelled_store import labelled_schema, read_batches
from streamshield.engine.views import scan_summary
from streamshield.engine.views.labels import denied_column, reader_column
from streamshield.engine.views.secured_view import secured_view
from streamshield.policy.encoding import EncodedAccess, RoleCodec
from streamshield.policy.privileges import Privilege
from streamshield.policy.reader_range import reader_range
from tests.spark.test_table13 import masked_landing

pytestmark = pytest.mark.spark

N_ROLES = 130
CODEC = RoleCodec(hierarchy(N_ROLES))
ROLE_SETS = (["r000"], ["r063"], ["r064"], ["r129"], ["r001", "r100"], ["r000", "r129"])


@pytest.fixture(scope="module")
def store(spark: SparkSession, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("scan-summary")
    landing = write_landing(root / "landing", 2400, 40, N_ROLES, providers=4)
    masked_landing(landing)
    ingest = Ingest(spark, hierarchy(N_ROLES), {STREAM.name: STREAM})
    job = IngestJob(ingest, landing, root / "ss")
    job.start(available_now=True).awaitTermination()
    return job.store.path(STREAM.name)


def labelled(spark: SparkSession, path: Path) -> DataFrame:
    struct = labelled_schema(spark, STREAM.ddl, len(STREAM.names), CODEC.width, summaries=True)
    return read_batches(spark, struct, [path])


def words(row, obj: int) -> EncodedAccess:
    return EncodedAccess(
        tuple(row[reader_column(obj, w)] for w in range(CODEC.width)),
        tuple(row[denied_column(obj, w)] for w in range(CODEC.width)),
    )


def expected(rows: list, roles: list[str]) -> list[tuple]:
    """The view's rows spelled out over the words, without Spark or the summaries."""
    query = CODEC.query(roles)
    out = []
    for row in rows:
        if not words(row, 0).allows(query):
            continue
        values = [
            row[name] if words(row, obj).allows(query) else None
            for obj, name in enumerate(STREAM.names, start=1)
        ]
        out.append((row["seq"], *values))
    return sorted(out)


def view_rows(frame: DataFrame, roles: list[str]) -> list[tuple]:
    view = secured_view(frame, STREAM, CODEC, roles).select("_ss_seq", *STREAM.names)
    return sorted(tuple(r) for r in view.collect())


def test_summaries_say_what_the_words_say_and_files_are_sorted(spark, store) -> None:
    rows = labelled(spark, store).collect()
    differing = 0
    for row in rows:
        read = tuple(row[reader_column(0, w)] for w in CODEC.block(Privilege.READ))
        same = all(words(row, obj) == words(row, 0) for obj in range(1, len(STREAM.names) + 1))
        differing += not same
        got = (row[scan_summary.LO], row[scan_summary.HI])
        assert got == reader_range(read), row["seq"]
    assert differing, "the masked provider's attributes differ from their tuple"
    assert {r[scan_summary.HI] // 64 for r in rows if r[scan_summary.HI] >= 0} == {0, 1, 2}
    for file in store.rglob("*.parquet"):
        lows = pq.read_table(file, columns=[scan_summary.LO]).column(0).to_pylist()
        assert lows == sorted(lows), file


def test_the_view_returns_the_rows_and_nulls_of_the_words(spark, store) -> None:
    frame = labelled(spark, store)
    rows = frame.collect()
    for roles in (*ROLE_SETS, [f"r{i:03d}" for i in range(N_ROLES)]):
        want = expected(rows, roles)
        assert want, roles
        assert view_rows(frame, roles) == want, roles


def test_the_range_test_reaches_parquet(spark, store) -> None:
    """Only a query whose roles leave bits out gets the range test, pushed to the scan."""
    frame = labelled(spark, store)
    few = secured_view(frame, STREAM, CODEC, ["r064"])._jdf.queryExecution().executedPlan()
    assert "_ss_scan_lo" in few.toString().split("PushedFilters")[1].split("]")[0]
    every = secured_view(frame, STREAM, CODEC, [f"r{i:03d}" for i in range(N_ROLES)])
    assert "_ss_scan_lo" not in every._jdf.queryExecution().executedPlan().toString()


def test_files_written_before_the_summaries_read_the_same(spark, store, tmp_path) -> None:
    """Old files lack the columns (NULL): no range test skips them, masks test words."""
    frame = labelled(spark, store)
    old = frame.drop(*(f.name for f in scan_summary.FIELDS))
    old.write.parquet(str(tmp_path / "old"))
    older = labelled(spark, tmp_path / "old")
    assert older.filter(older[scan_summary.LO].isNotNull()).count() == 0
    rows = frame.collect()
    for roles in ROLE_SETS:
        assert view_rows(older, roles) == expected(rows, roles), roles
