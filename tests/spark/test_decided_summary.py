"""Scan summaries taken from the policy, not from each row's words (engine/ingest/ingest.py).

Ingest summarises each distinct policy once on the driver (policy.reader_range.
label_summary) and gives every passing tuple its policy's ``lo``/``hi``, and
every other tuple the summary of zero words. This tries to make the two disagree: 130
roles (bit 63 and words past the first), a policy changing twice mid-batch, an
attribute-level deny, tuples before any sp, an sp naming an unknown role (a reset), an
incomplete policy, a late tuple in a second batch, and in the same batches a second
stream whose policy names tuple ids (summarised row by row). Every row's summary must be
what its words say, every file sorted by ``lo``, and a role no policy names reads
nothing through the secured view.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from bench.workload import STREAM, hierarchy
from pyspark.sql import SparkSession

from streamshield.catalog.streams import StreamDefinition
from streamshield.engine.ingest.ingest import ELEMENT_SCHEMA, Ingest
from streamshield.engine.store.labelled_store import LabelledStore, labelled_schema, read_batches
from streamshield.engine.views import labels, scan_summary
from streamshield.engine.views.secured_view import secured_view
from streamshield.lang.wire import to_line
from streamshield.policy.elements import Channel, Element, SpElement, TupleElement
from streamshield.policy.encoding import RoleCodec
from streamshield.policy.punctuation import (
    DataDescription,
    SecurityPunctuation,
    SecurityRestriction,
    Sign,
)
from streamshield.policy.shield import Reason
from streamshield.policy.sp_patterns import ANY, Literal, OneOf, Range
from tests.spark.conformance import summary_disagrees

pytestmark = pytest.mark.spark

N_ROLES = 130
CODEC = RoleCodec(hierarchy(N_ROLES))
OTHER = StreamDefinition("Others", (("id", "bigint"),), "id")  # small: its fold is per row
STREAMS = {STREAM.name: STREAM, OTHER.name: OTHER}


def sp(channel, seq, ts, sn, roles, sign=Sign.GRANT, tuples=ANY, attributes=ANY) -> SpElement:
    restriction = SecurityRestriction(roles if not isinstance(roles, str) else Literal(roles))
    punctuation = SecurityPunctuation(
        DataDescription(ANY, tuples, attributes), restriction, sign=sign, ts=ts, sn=sn
    )
    return SpElement(channel, seq, punctuation)


def tup(channel, seq, ts, csn) -> TupleElement:
    """Tuple ids and ``id`` are ``seq`` (provider ``b``: 1000 + ``seq``)."""
    tid = seq + (1000 if channel.provider == "b" else 0)
    return TupleElement(channel, seq, tid, ts, csn, {"id": tid, "value": seq / 2, "ts": seq})


def batches() -> list[list[Element]]:
    a, b = Channel(STREAM.name, "a"), Channel(STREAM.name, "b")
    c = Channel(OTHER.name, "c")
    first = [
        tup(a, 1, 1, 1),  # before any sp: no policy
        sp(a, 2, 1, 1, "r064"),
        *(tup(a, s, 1, 1) for s in range(3, 7)),
        sp(a, 7, 2, 1, OneOf(frozenset({Literal("r000"), Literal("r129")}))),
        sp(a, 8, 2, 2, "r129", Sign.DENY, attributes=Literal("value")),
        *(tup(a, s, 2, 2) for s in range(9, 13)),
        sp(a, 13, 3, 1, "nobody"),  # an unknown role: invalid, a reset
        *(tup(a, s, 3, 1) for s in (14, 15)),
        sp(a, 16, 4, 1, "r063"),
        *(tup(a, s, 4, 2) for s in (17, 18)),  # declares two sps, one came: incomplete
        sp(b, 1, 1, 1, "r063"),  # bit 63: a negative word
        *(tup(b, s, 1, 1) for s in range(2, 6)),
        sp(c, 1, 1, 1, "r100", tuples=Range(0, 4)),  # names tuple ids: row by row
        sp(c, 2, 1, 2, "r001"),
        *(tup(c, s, 1, 2) for s in range(3, 9)),
    ]
    second = [
        tup(a, 5, 2, 2),  # late: seq 5 was processed
        sp(a, 19, 5, 1, "r065"),
        *(tup(a, s, 5, 1) for s in range(20, 23)),
        *(tup(c, s, 1, 2) for s in (9, 10)),
    ]
    return [first, second]


@pytest.fixture(scope="module")
def store(spark: SparkSession, tmp_path_factory) -> LabelledStore:
    """The batches labelled and written as ingest writes them."""
    root = tmp_path_factory.mktemp("decided-summary")
    ingest = Ingest(spark, hierarchy(N_ROLES), STREAMS)
    store = LabelledStore(root / "labelled")
    states: dict = {}
    for index, batch in enumerate(batches()):
        path = root / f"batch-{index}.jsonl"
        path.write_text("\n".join(to_line(e) for e in batch) + "\n")
        frames = ingest.label_batch(spark.read.schema(ELEMENT_SCHEMA).json(str(path)), states)
        try:
            store.write_batch(index, frames)
        finally:
            ingest.release()
    return store


def labelled(spark: SparkSession, path: Path, stream: StreamDefinition = STREAM):
    struct = labelled_schema(spark, stream.ddl, len(stream.names), CODEC.width, summaries=True)
    return read_batches(spark, struct, [path])


def test_every_row_summary_is_what_its_words_say(spark, store) -> None:
    reasons, sames = set(), set()
    for name, stream in STREAMS.items():
        rows = labelled(spark, store.path(name), stream).collect()
        assert rows, name
        objects = len(stream.names) + 1
        words = labels.label_names(objects, CODEC.width)
        tuple_words = 2 * CODEC.width
        for row in rows:
            assert not summary_disagrees(row, objects, CODEC), (name, row["seq"])
            reasons.add(row["reason"])
            sames.add(all(row[n] == row[words[i % tuple_words]] for i, n in enumerate(words)))
        for file in store.path(name).rglob("*.parquet"):
            lows = pq.read_table(file, columns=[scan_summary.LO]).column(0).to_pylist()
            assert lows == sorted(lows), file
    assert {Reason.PASS.value, Reason.NO_POLICY.value, Reason.OUT_OF_ORDER.value} <= reasons
    assert Reason.INVALID_POLICY.value in reasons
    assert sames == {True, False}, "the attribute-level deny makes attributes differ"


def test_who_reads_what(spark, store) -> None:
    """Each role reads the tuples of the policies naming it, and nothing else."""
    frame = labelled(spark, store.path(STREAM.name))

    def ids(roles: list[str]) -> set[int]:
        view = secured_view(frame, STREAM, CODEC, roles).select("id")
        return {r["id"] for r in view.collect()}

    assert ids(["r050"]) == set(), "no policy names r050"
    assert ids(["r064"]) == set(range(3, 7))
    assert ids(["r063"]) == set(range(1002, 1006)), "a's r063 policy is incomplete"
    assert ids(["r065"]) == set(range(20, 23))
    both = secured_view(frame, STREAM, CODEC, ["r129"]).select("id", "value").collect()
    assert {r["id"] for r in both} == set(range(9, 13))
    assert all(r["value"] is None for r in both), "r129 is denied value"


def test_a_batch_stores_only_the_label_words_its_rows_need(store) -> None:
    """policy.stored_words on disk: no attribute word equal to the tuple's in every row,
    no tuple word zero in every row, every word where a policy is folded per tuple; the
    tests above read the words back through the restoring reader."""
    objects = len(STREAM.names) + 1
    names = labels.label_names(objects, CODEC.width)

    def columns(stream: str) -> set[str]:
        files = list((store.path(stream) / "batch=0").glob("*.parquet"))
        assert files, stream
        found = {n for f in files for n in pq.read_schema(f).names}
        return found & set(names)

    first = columns(STREAM.name)
    attributes = {n for n in first if not n.startswith(("_ss_r0_", "_ss_d0_"))}
    # only `value` has words of its own (r129's deny); `id` and `ts` are the tuple's
    assert attributes and all(n.startswith("_ss_d2_") for n in attributes), sorted(attributes)
    assert not any(n.startswith("_ss_d0_") for n in first), "no tuple-level deny: not stored"
    assert {"_ss_r0_0", "_ss_r0_1", "_ss_r0_2"} <= first, "r000, r064 and r129's words"
    other = columns(OTHER.name)
    assert other == set(labels.label_names(len(OTHER.names) + 1, CODEC.width)), "per tuple"


def test_late_tuples_are_found_alike_with_a_literal_map_or_a_broadcast_table(
    spark, tmp_path, monkeypatch
) -> None:
    """A few channels' processed seqs ride in the plan as a map literal, many in a
    broadcast table: the same tuples are late either way (here: seq 5 of channel a)."""

    def reasons(root: Path) -> set[tuple]:
        ingest = Ingest(spark, hierarchy(N_ROLES), STREAMS)
        states: dict = {}
        out: set[tuple] = set()
        for index, batch in enumerate(batches()):
            path = root / f"batch-{index}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("\n".join(to_line(e) for e in batch) + "\n")
            frames = ingest.label_batch(spark.read.schema(ELEMENT_SCHEMA).json(str(path)), states)
            try:
                for frame in frames.values():
                    rows = frame.select("provider", "seq", "reason").collect()
                    out |= {(index, *row) for row in rows}
            finally:
                ingest.release()
        return out

    literal = reasons(tmp_path / "literal")
    monkeypatch.setattr("streamshield.engine.ingest.ingest.LITERAL_CHANNELS", 0)
    broadcast = reasons(tmp_path / "broadcast")
    assert literal == broadcast
    assert (1, "a", 5, Reason.OUT_OF_ORDER.value) in literal
