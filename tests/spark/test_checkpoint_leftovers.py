"""A process killed while Spark writes the first offset of a query leaves a hidden
temporary file in the checkpoint's ``offsets`` log; Spark 4 then refuses to start that
query ever again (STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY). Every query of the project
gets its checkpoint through ``at_checkpoint``, which sweeps such leftovers first."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException

from streamshield.engine.store.checkpoint_leftovers import at_checkpoint, sweep

pytestmark = pytest.mark.spark


def _killed_during_first_offset(checkpoint: Path) -> list[Path]:
    """What SIGKILL between Spark's temporary write and its rename leaves behind."""
    offsets = checkpoint / "offsets"
    offsets.mkdir(parents=True)
    tmp = offsets / f".0.{uuid.uuid4()}.tmp"
    tmp.write_text('v1\n{"batchWatermarkMs":0}\n')
    crc = offsets / f".{tmp.name}.crc"
    crc.write_bytes(b"crc")
    (checkpoint / "metadata").write_text(json.dumps({"id": str(uuid.uuid4())}))
    return [tmp, crc]


def _query(spark, source: Path, checkpoint: Path, sweep_first: bool, seen: list[int]):
    frame = spark.readStream.schema("n INT").json(str(source))
    writer = frame.writeStream.foreachBatch(lambda batch, _: seen.append(batch.count()))
    writer = (
        at_checkpoint(writer, checkpoint)
        if sweep_first
        else writer.option("checkpointLocation", str(checkpoint))
    )
    return writer.trigger(availableNow=True).start()


def test_a_leftover_first_offset_stops_spark_and_the_sweep_lets_it_start(spark, tmp_path):
    source = tmp_path / "in"
    source.mkdir()
    (source / "a.json").write_text("\n".join(json.dumps({"n": n}) for n in range(5)))

    refused = tmp_path / "refused"
    _killed_during_first_offset(refused)
    with pytest.raises(StreamingQueryException, match="CHECKPOINT_LOCATION_NOT_EMPTY"):
        _query(spark, source, refused, False, []).awaitTermination()

    checkpoint = tmp_path / "checkpoint"
    leftovers = _killed_during_first_offset(checkpoint)
    seen: list[int] = []
    _query(spark, source, checkpoint, True, seen).awaitTermination()
    assert sum(seen) == 5
    assert not any(path.exists() for path in leftovers)
    assert (checkpoint / "commits" / "0").is_file()


def test_the_sweep_keeps_every_finished_log_entry(tmp_path):
    for log in ("offsets", "commits"):
        (tmp_path / log).mkdir()
        (tmp_path / log / "0").write_text("v1")
        (tmp_path / log / ".0.crc").write_text("crc")
        (tmp_path / log / f".1.{uuid.uuid4()}.tmp").write_text("half")
    removed = sweep(tmp_path)
    assert len(removed) == 2
    for log in ("offsets", "commits"):
        assert sorted(p.name for p in (tmp_path / log).iterdir()) == [".0.crc", "0"]
    assert sweep(tmp_path / "missing") == []
