"""A small batch under policies already in force is labelled in one pass, on a guess the
write job checks (engine/ingest/ingest.py): a right guess writes exactly what the passes write,
a wrong one (an sp, a stale declaration, a late tuple, a new channel) installs nothing
and the passes label the batch."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from streamshield.engine.ingest.ingest import Guess, Ingest
from streamshield.engine.ingest.ingest_job import IngestJob
from streamshield.engine.tuning import STREAMING
from streamshield.examples import hospital
from streamshield.lang.wire import to_line
from streamshield.policy.elements import TupleElement
from streamshield.policy.encoding import RoleCodec
from tests.spark.conformance import STREAMS
from tests.spark.test_ingest_gaps import Feed

pytestmark = pytest.mark.spark


def batches() -> list[list]:
    """One landing file each: tuples after an sp batch, then guesses that must fail."""
    a, b = Feed("p1"), Feed("p2")
    out: list[list] = []

    def cut(*feeds: Feed) -> None:
        out.append([e for f in feeds for e in f.elements])
        for f in feeds:
            f.elements = []

    cut(a.sp(10).tuple(10).tuple(10))  # sps: the passes; (10, 1) passed
    cut(a.tuple(10).tuple(10))  # guessed right (after a batch with sps too)
    cut(a.tuple(10).tuple(10).tuple(10))  # guessed right
    cut(a.tuple(10).tuple(9).tuple(10))  # a stale declaration: wrong; the tracker resets
    cut(a.tuple(10))  # nothing passes on a reset tracker: no guess
    cut(a.sp(20, "GP").tuple(20))  # nothing passed last time: no guess; a new policy
    cut(a.tuple(20).tuple(20))  # guessed right
    cut(a.tuple(20))  # guessed right
    values = {"patient_id": 120, "beats_per_min": 1.0, "ts": a.seq}
    resent = TupleElement(a.channel, a.seq, 120, 20, 1, values)  # late: out of order
    cut(a.tuple(20))
    out[-1].insert(0, resent)
    cut(a.tuple(20), b.sp(30).tuple(30))  # an sp, and a channel never guessed: wrong
    cut(a.tuple(20))  # both channels guessed, one has tuples: right
    return out


def ingest(spark, root: Path, parts: list[list], guess: bool = True) -> IngestJob:
    landing = root / "landing" / "HeartRate"
    landing.mkdir(parents=True)
    for i, part in enumerate(parts):
        path = landing / f"part-{i:04d}.jsonl"
        lines = (e if isinstance(e, str) else to_line(e) for e in part)  # str: a raw line
        path.write_text("\n".join(lines) + "\n")
        os.utime(path, (1_000_000 + i, 1_000_000 + i))  # the source takes them in order
    labelling = Ingest(spark, hospital.hierarchy(), STREAMS, hospital.server_policies())
    tuning = replace(STREAMING, ingest_guess=guess)
    job = IngestJob(labelling, root / "landing", root / "store", tuning)
    job.start(available_now=True, max_files=1).awaitTermination()
    return job


def stored(spark, job: IngestJob) -> list[tuple]:
    """HeartRate's stored rows as every engine reads them (label words restored)."""
    width = RoleCodec(hospital.hierarchy()).width
    frame = job.store.read(spark, STREAMS["HeartRate"], width, summaries=True)
    return sorted(tuple(r) for r in frame.select(*sorted(frame.columns)).collect())


def test_right_guesses_write_what_the_passes_write_and_wrong_ones_nothing(
    spark, tmp_path, monkeypatch
) -> None:
    parts: list[list] = [*batches()]
    # a batch guessed right with elements of no known stream (the landing zone rejects
    # them first): ignored, not a miss (the guess reads the batch unfiltered)
    parts[2] = [
        *parts[2],
        '{"type": "tuple", "stream": "Nowhere", "provider": "p1", "seq": 1, "tid": "x"}',
        '{"type": "tuple", "provider": "p1", "seq": 2, "tid": "y"}',
    ]
    verdicts: list[bool] = []
    holds = Guess.holds

    def spy(self) -> bool:
        verdicts.append(holds(self))
        return verdicts[-1]

    monkeypatch.setattr(Guess, "holds", spy)
    guessed = ingest(spark, tmp_path / "guessed", parts)
    assert verdicts == [True, True, False, True, True, False, False, True]
    passes = ingest(spark, tmp_path / "passes", parts, guess=False)  # the passes only
    assert len(verdicts) == 8, "no guess without the guess"
    assert stored(spark, guessed) == stored(spark, passes)
    assert guessed.state.load(len(parts)) == passes.state.load(len(parts))
    reasons = spark.read.parquet(str(guessed.store.path("HeartRate"))).select("reason")
    assert {r[0] for r in reasons.collect()} == {"pass", "out of order", "no policy"}
