"""A small frame written from the driver reads back as Spark's own write of it."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from streamshield.engine.store.small_writes import read_written, write_parquet

ROWS = """
SELECT id,
       CAST(id AS INT) AS i, CAST(id AS SMALLINT) AS h, CAST(id AS TINYINT) AS b,
       IF(id % 3 = 0, NULL, CONCAT('v', id)) AS s,
       id * 1.5D AS d, CAST(id AS FLOAT) AS f, CAST(id / 7 AS DECIMAL(12, 4)) AS m,
       id % 2 = 0 AS flag,
       TIMESTAMP '2026-11-25 12:00:00' + make_interval(0, 0, 0, 0, 0, 0, id) AS ts,
       DATE '2026-11-25' + CAST(id AS INT) AS day,
       CAST(CONCAT('x', id) AS BINARY) AS raw,
       ARRAY(id, -id, 9223372036854775807L) AS words,
       NAMED_STRUCT('a', id, 'b', IF(id % 2 = 0, NULL, 'odd')) AS st,
       MAP('k', id) AS mp,
       IF(id % 4 = 0, NULL, ARRAY(NAMED_STRUCT('x', id))) AS nested
FROM range(0, 50)
"""


def _rows(frame) -> list:
    return sorted(frame.collect(), key=lambda r: r["id"])


def test_every_type_reads_back_as_from_spark_s_write(spark, tmp_path) -> None:
    frame = spark.sql(ROWS)
    write_parquet(frame, tmp_path / "driver", small=True)
    write_parquet(frame, tmp_path / "spark", small=False)
    driver = spark.read.parquet(str(tmp_path / "driver"))
    plain = spark.read.parquet(str(tmp_path / "spark"))
    assert [(f.name, f.dataType) for f in driver.schema] == [
        (f.name, f.dataType) for f in plain.schema
    ]
    assert _rows(driver) == _rows(plain) == _rows(frame)
    # what the stores do: read with the schema they know
    assert _rows(spark.read.schema(frame.schema).parquet(str(tmp_path / "driver"))) == _rows(frame)


def test_one_file_with_statistics_and_no_spark_markers(spark, tmp_path) -> None:
    (tmp_path / "driver").mkdir()
    (tmp_path / "driver" / "stale.parquet").write_bytes(b"old")
    write_parquet(spark.range(10), tmp_path / "driver", small=True)
    files = sorted(p.name for p in (tmp_path / "driver").iterdir())
    assert len(files) == 1 and files[0].startswith("part-") and files[0].endswith(".parquet")
    stats = pq.ParquetFile(tmp_path / "driver" / files[0]).metadata.row_group(0).column(0)
    assert (stats.statistics.min, stats.statistics.max) == (0, 9), (
        "the scan summaries skip by these"
    )
    write_parquet(spark.range(10), tmp_path / "spark", small=False)
    assert (tmp_path / "spark" / "_SUCCESS").exists(), "the other arm is Spark's own write"


def test_an_empty_frame_keeps_its_schema(spark, tmp_path) -> None:
    frame = spark.sql(ROWS).filter("id < 0")
    write_parquet(frame, tmp_path / "empty", small=True)
    back = spark.read.parquet(str(tmp_path / "empty"))
    assert back.count() == 0
    assert [f.name for f in back.schema] == frame.columns


def test_a_failing_frame_fails_and_is_not_written_empty(spark, tmp_path) -> None:
    with pytest.raises(Exception, match="DIVIDE_BY_ZERO"):
        write_parquet(
            spark.sql("SELECT 1 / (id - id) AS x FROM range(3)"), tmp_path / "x", small=True
        )
    assert not any((tmp_path / "x").glob("*.parquet"))


def test_the_one_file_is_sorted_as_each_of_spark_s_files_is(spark, tmp_path) -> None:
    """Ingest sorts each partition by the scan summary; the driver's file holds every
    partition, so it is sorted by that column too."""
    frame = spark.range(0, 100, 1, 4).selectExpr("(id * 37) % 100 AS k").sortWithinPartitions("k")
    write_parquet(frame, tmp_path / "sorted", small=True, sorted_by="k")
    (file,) = (tmp_path / "sorted").glob("*.parquet")
    assert pq.read_table(file).column("k").to_pylist() == list(range(100))


def test_read_written_reads_the_files_as_the_reader_with_the_frame_s_schema(
    spark, tmp_path
) -> None:
    """The JVM's schema, not a JSON round trip: same schema, same rows, every type."""
    frame = spark.sql(ROWS)
    write_parquet(frame, tmp_path / "driver", small=True)
    files = [str(p) for p in (tmp_path / "driver").glob("*.parquet")]
    plain = spark.read.schema(frame.schema).parquet(*files)
    read = read_written(frame, files)
    assert read.schema == plain.schema
    assert read.sparkSession is frame.sparkSession
    assert _rows(read) == _rows(plain) == _rows(frame)
