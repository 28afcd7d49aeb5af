"""A small ingest batch read on the driver (engine/driver_batch.py) labels exactly what
the streaming file source's batch labels: every labelled column, the shield state, the
counts and the progress's input rows, over landing files with malformed and hostile
lines; no Spark job runs for such a batch, and each case the driver cannot read as Spark
does, or cannot compute, takes the old path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from streamshield.engine import driver_batch
from streamshield.engine import ingest as ingest_module
from streamshield.engine import ingest_job as ingest_job_module
from streamshield.engine.ingest import (
    _DECISIONS,
    ELEMENT_SCHEMA,
    Ingest,
    _decision_entries,
    _lookup_map,
)
from streamshield.engine.ingest_job import IngestJob
from streamshield.engine.local_frames import local_frame
from streamshield.examples import hospital
from streamshield.lang.wire import to_line
from streamshield.policy.encoding import RoleCodec
from tests.spark.conformance import STREAMS
from tests.spark.test_ingest_guess import batches

pytestmark = pytest.mark.spark

TUPLE = '{"type":"tuple","stream":"HeartRate","provider":"p1",'
HARMLESS: dict[str, bytes] = {
    "blank": b"",
    "spaces": b"  \t ",
    "garbage": b"garbage",
    "truncated": TUPLE.encode(),
    "null": b"null",
    "scalar": b"5",
    "empty object": b"{}",
    "unknown stream": b'{"type":"tuple","stream":"Nope","provider":"p1","seq":99,"x":[1]}',
}
"""Lines that make no element of a known stream: a batch of good lines with these still
goes by the guess."""
HOSTILE: dict[str, bytes] = HARMLESS | {
    "single quotes": b"{'type':'tuple','stream':'HeartRate'}",  # Spark's JSON allows them
    "wrong seq type": (TUPLE + '"seq":"abc","policy":{"ts":10,"csn":1},"values":"{}"}').encode(),
    "float seq": (TUPLE + '"seq":1.5,"policy":{"ts":10,"csn":1}}').encode(),
    "huge seq": (TUPLE + '"seq":99999999999999999999999,"policy":{"ts":10,"csn":1}}').encode(),
    "huge policy": (TUPLE + '"seq":70,"policy":{"ts":1e400,"csn":1}}').encode(),
    "policy array": (TUPLE + '"seq":70,"policy":[10,1]}').encode(),
    "values object": (TUPLE + '"seq":70,"policy":{"ts":10,"csn":1},"values":{"a":1}}').encode(),
    "duplicate keys": b'{"type":"tuple","stream":"Nope","stream":"HeartRate","provider":"p1"}',
    "duplicate seq": (TUPLE + '"seq":70,"seq":71,"policy":{"ts":10,"csn":1}}').encode(),
    "extra fields": (TUPLE + '"seq":70,"zzz":[1,{"q":2}],"policy":{"ts":10,"csn":1}}').encode(),
    "two objects": (TUPLE + '"seq":70}{"type":"sp"}').encode(),
    "trailing text": (TUPLE + '"seq":70} trailing').encode(),
    "leading spaces": b"   " + (TUPLE + '"seq":70,"policy":{"ts":10,"csn":1}}').encode(),
    "NaN": (TUPLE + '"seq":NaN}').encode(),
    "comment": (TUPLE + '/* c */ "seq":70}').encode(),
    "upper-case keys": b'{"TYPE":"tuple","Stream":"HeartRate","provider":"p1","seq":70}',
    "bare CR inside": (TUPLE + '\r"seq":70,"policy":{"ts":10,"csn":1}}').encode(),
    "escaped NUL": (TUPLE + '"seq":70,"tid":"a\\u0000b"}').encode(),
    "deep nesting": (TUPLE + '"zzz":' + "[" * 600 + "]" * 600 + ',"seq":70}').encode(),
    "sp of wrong types": b'{"type":"sp","stream":"HeartRate","provider":"p1","seq":3,'
    b'"immutable":"yes","srp":{"roles":5,"grant_option":"x"}}',
}
"""Lines the driver reads as the file source does."""
REFUSED: dict[str, bytes] = {
    "invalid UTF-8": (TUPLE + '"seq":70,"tid":"\xff\xfe"}').encode("latin-1"),
    "UTF-8 BOM": b"\xef\xbb\xbf" + (TUPLE + '"seq":70}').encode(),
    "non-ASCII UTF-8": (TUPLE + '"seq":70,"tid":"\u00e4\u20ac"}').encode(),
    "control byte": (TUPLE + '"seq":70,"tid":"a\x01b"}').encode(),
    "NUL byte": b"\x00" + (TUPLE + '"seq":70}').encode(),
    "top-level array": b" [" + (TUPLE + '"seq":70}').encode() + b"]",
}
"""Lines Spark's file reader and ``from_json`` read, or may read, differently: a batch
with one is read by the streaming query, as before."""


def rows(frame) -> list[str]:
    return sorted(repr(r.asDict(recursive=True)) for r in frame.collect())


def test_lines_parse_as_the_file_reader_reads_them(spark, tmp_path) -> None:
    """Line by line, and as files with CRLF, a bare CR and no final newline."""
    files = {name: line + b"\n" for name, line in HOSTILE.items()}
    good = [to_line(e).encode() for e in batches()[0]]
    files |= {
        "CRLF": b"\r\n".join(good) + b"\r\n",
        "CR": b"\r".join(good),
        "no final newline": b"\n".join(good),
        "empty file": b"",
        "only newlines": b"\n\r\n\n",
        "everything": b"\n".join(HOSTILE.values()),
    }
    wrong = []
    for i, (name, data) in enumerate(files.items()):
        path = tmp_path / f"f{i}.jsonl"
        path.write_bytes(data)
        read = driver_batch.elements(spark, [path.as_uri()])
        assert read is not None, name
        frame, count = read
        expected = spark.read.schema(ELEMENT_SCHEMA).json(str(path))
        assert frame.schema == expected.schema
        if rows(frame) != rows(expected) or count != expected.count():
            wrong.append(name)
    assert wrong == []


def test_lines_read_otherwise_are_left_to_spark(tmp_path) -> None:
    for i, (name, line) in enumerate(REFUSED.items()):
        path = tmp_path / f"r{i}.jsonl"
        path.write_bytes(b'{"type":"tuple"}\n' + line + b"\n")
        assert driver_batch.lines([path.as_uri()]) is None, name
    assert driver_batch.lines([(tmp_path / "missing.jsonl").as_uri()]) is None


def stored(spark, job: IngestJob) -> list[tuple]:
    """HeartRate's stored rows as every engine reads them (label words restored), every
    column, in one order (NULLs among values: ordered by their text)."""
    width = RoleCodec(hospital.hierarchy()).width
    frame = job.store.read(spark, STREAMS["HeartRate"], width, summaries=True)
    return sorted((tuple(r) for r in frame.select(*sorted(frame.columns)).collect()), key=repr)


def land(root: Path, files: list[bytes]) -> Path:
    landing = root / "landing" / "HeartRate"
    landing.mkdir(parents=True)
    for i, data in enumerate(files):
        path = landing / f"part-{i:04d}.jsonl"
        path.write_bytes(data)
        os.utime(path, (1_000_000 + i, 1_000_000 + i))  # the source takes them in order
    return root / "landing"


class Ran:
    """One ingest run over landing files: its job, counts, input rows per batch, and per
    batch whether the driver wrote it and the Spark jobs that ran meanwhile."""

    def __init__(self, spark, root: Path, files: list[bytes], monkeypatch) -> None:
        labelling = Ingest(spark, hospital.hierarchy(), STREAMS, hospital.server_policies())
        self.job = IngestJob(labelling, land(root, files), root / "store")
        self.counts: list[tuple] = []
        self.job.on_counts = lambda *c: self.counts.append(c)
        self.driver: list[tuple[bool, int]] = []
        on_driver = IngestJob._on_driver

        def spied(job, batch_id, states, landed):
            before = job_ids(spark)
            got = on_driver(job, batch_id, states, landed)
            self.driver.append((got is not None, len(job_ids(spark) - before)))
            return got

        monkeypatch.setattr(IngestJob, "_on_driver", spied)
        query = self.job.start(available_now=True, max_files=1)
        query.awaitTermination()
        self.read = {p["batchId"]: p["numInputRows"] for p in query.recentProgress}
        self.files = sorted((root / "landing" / "HeartRate").iterdir())
        monkeypatch.setattr(IngestJob, "_on_driver", on_driver)


def job_ids(spark) -> set[int]:
    """The Spark jobs started so far (the listener bus drained first)."""
    sc = spark.sparkContext._jsc.sc()
    sc.listenerBus().waitUntilEmpty()
    jobs = sc.statusStore().jobsList(None)
    return {int(jobs.apply(i).jobId()) for i in range(jobs.size())}


def both(spark, tmp_path, files, monkeypatch, streaming: Ran | None = None) -> tuple[Ran, Ran]:
    """``files`` through the driver path and through the streaming frame only (or
    ``streaming``, a run of the same files taken before); asserts they labelled, decided
    and counted alike."""
    monkeypatch.setattr(IngestJob, "on_driver", True)
    driver = Ran(spark, tmp_path / "driver", files, monkeypatch)
    if streaming is None:
        monkeypatch.setattr(IngestJob, "on_driver", False)
        streaming = Ran(spark, tmp_path / "streaming", files, monkeypatch)
    assert stored(spark, driver.job) == stored(spark, streaming.job)
    assert driver.job.state.load(len(files)) == streaming.job.state.load(len(files))
    assert driver.counts == streaming.counts
    assert streaming.driver == [(False, 0)] * len(files)
    return driver, streaming


def feed(extra: dict[str, bytes]) -> list[bytes]:
    """The guess test's batches, ``extra`` lines mixed into each; one batch with CRLF,
    one with no final newline."""
    out = []
    lines_of = list(extra.values())
    for i, part in enumerate(batches()):
        lines = [to_line(e).encode() for e in part]
        lines.insert(len(lines) // 2, lines_of[i % len(lines_of)])
        lines.append(lines_of[(i + 5) % len(lines_of)])
        sep = b"\r\n" if i == 2 else b"\n"
        out.append(sep.join(lines) + (b"" if i == 3 else sep))
    return out


def test_the_driver_labels_what_the_file_source_labels_and_runs_no_job(
    spark, tmp_path, monkeypatch
) -> None:
    driver, streaming = both(spark, tmp_path, feed(HARMLESS), monkeypatch)
    # the batches whose guess holds (test_ingest_guess): written with no Spark job
    assert driver.driver == [
        (False, 0),  # sps: nothing passed before, nothing to guess
        (True, 0),
        (True, 0),
        (False, 0),  # a stale declaration: not as guessed
        (False, 0),
        (False, 0),
        (True, 0),
        (True, 0),
        (False, 0),  # a late tuple
        (False, 0),  # an sp
        (True, 0),
    ]
    # the progress counts the rows read: the elements of a batch the driver read (the
    # streaming frame's scan counts them once per job that reads them)
    for batch, (on_driver, _) in enumerate(driver.driver):
        file = str(driver.files[batch])
        elements = spark.read.schema(ELEMENT_SCHEMA).json(file).count()
        if on_driver:
            assert driver.read[batch] == elements > 0
        else:
            assert driver.read[batch] == streaming.read[batch] >= elements


@pytest.mark.long  # the path is off by default (IngestJob.on_driver): turning it on needs this
def test_hostile_lines_label_as_the_file_source_labels(spark, tmp_path, monkeypatch) -> None:
    files = feed(HOSTILE)
    files.append(b"\n".join(HOSTILE.values()) + b"\n")  # every hostile line in one batch
    files += [line + b"\n" + files[1] for line in REFUSED.values()]
    driver, _ = both(spark, tmp_path, files, monkeypatch)
    assert driver.driver[-len(REFUSED) :] == [(False, 0)] * len(REFUSED)


def test_each_fallback_labels_as_the_file_source(spark, tmp_path, monkeypatch) -> None:
    """A batch past SMALL_BYTES, a plan that does not fold, an expression failing on the
    driver, and decisions the lookup cannot hold all go the old way, to the same result."""
    files = feed(HARMLESS)[:3]
    monkeypatch.setattr(ingest_job_module, "SMALL_BYTES", 10)
    driver, streaming = both(spark, tmp_path / "large", files, monkeypatch)
    assert [d for d, _ in driver.driver] == [False] * 3
    monkeypatch.undo()
    monkeypatch.setattr(ingest_module, "driver_arrow", lambda frame: None)
    driver, _ = both(spark, tmp_path / "unfolded", files, monkeypatch, streaming)
    assert [d for d, _ in driver.driver] == [False] * 3
    monkeypatch.undo()

    def failing(frame):
        raise RuntimeError("an expression failed on a row")

    monkeypatch.setattr(ingest_module, "driver_arrow", failing)
    driver, _ = both(spark, tmp_path / "failing", files, monkeypatch, streaming)
    assert [d for d, _ in driver.driver] == [False] * 3


def test_the_lookup_refuses_repeated_or_null_keys(spark) -> None:
    row = ("HeartRate", "p1", -(2**63), 2**63 - 1, 10, 1, "pass", "id", None, None, [1], 0, 0)
    assert _decision_entries([row]) is not None
    assert _decision_entries([row, row]) is None
    assert _decision_entries([(*row[:4], None, *row[5:])]) is None


def test_the_lookup_holds_the_decision_table_row_exactly(spark) -> None:
    """The map literal's row equals the decision table's (the join's) row, rules with
    every pattern kind, infinities, quotes and non-ASCII text included."""
    from pyspark.sql import functions as F

    rules = [
        (0, None, None, None, None, None, None, None, [1, -1, 2**63 - 1]),
        (1, 0.1, None, None, None, None, None, None, [-(2**63)]),
        (2, None, 'a"b\\c\u00e4', None, None, None, None, None, [0]),
        (3, None, None, [1.5, 1e300], ["x", "\u20ac"], None, None, None, [3]),
        (4, None, None, None, None, float("-inf"), float("inf"), None, [4]),
        (5, None, None, None, None, None, None, "^a(?>.*?b).*c$", [5]),
    ]
    row = ("H", "p\u00e4", -(2**63), 2**63 - 1, 10, 1, "pass", "id", 7, rules, [1, 2], 0, 3)
    entries = _decision_entries([row])
    assert entries is not None
    key = F.struct(
        F.lit("H").alias("s"),
        F.lit("p\u00e4").alias("p"),
        F.lit(10).cast("long").alias("t"),
        F.lit(1).cast("long").alias("c"),
    )
    looked = spark.range(1).select(F.try_element_at(_lookup_map(entries), key).alias("d"))
    got = looked.select("d.*").collect()[0].asDict(recursive=True)
    table = local_frame(spark, [row], _DECISIONS).collect()[0].asDict(recursive=True)
    assert got == table
