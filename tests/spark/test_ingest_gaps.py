"""Secure ingest finds each tuple's gap without sorting the batch, and agrees with the
reference shield both when the driver counts the gaps from the sps' seqs and when a
channel needs the window (a declaration on both sides of one of its sps)."""

from __future__ import annotations

import pytest

from streamshield.engine.ingest.ingest import ELEMENT_SCHEMA, Ingest
from streamshield.engine.ingest.tracker_state import StateStore
from streamshield.examples import hospital
from streamshield.lang.cql import parse_policy
from streamshield.lang.wire import to_line
from streamshield.policy.elements import Channel, Element, SpElement, TupleElement
from tests.spark.conformance import STREAMS, reference, spark_labelled, spark_outcome

pytestmark = pytest.mark.spark
GRANT = "INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: *, SRP = rbac:{role};"
ROLE_SETS = [["C"], ["GP"], ["ND"], ["E"]]


class Feed:
    """One channel's elements with consecutive seqs."""

    def __init__(self, provider: str) -> None:
        self.channel, self.seq, self.elements = Channel("HeartRate", provider), 0, []

    def sp(self, ts: int, role: str = "C") -> Feed:
        for sp in parse_policy(GRANT.format(role=role), ts).sps:
            self.seq += 1
            self.elements.append(SpElement(self.channel, self.seq, sp))
        return self

    def tuple(self, ts: int, tid: int = 120) -> Feed:
        self.seq += 1
        values = {"patient_id": tid, "beats_per_min": float(self.seq), "ts": self.seq}
        self.elements.append(TupleElement(self.channel, self.seq, tid, ts, 1, values))
        return self


def _interleaved(*feeds: Feed) -> list[Element]:
    """The channels' elements alternating (order across channels means nothing)."""
    lists = [list(f.elements) for f in feeds]
    out: list[Element] = []
    while any(lists):
        for items in lists:
            if items:
                out.append(items.pop(0))
    return out


@pytest.fixture
def windowed(monkeypatch) -> list[set[Channel]]:
    """The channels each batch sent through the window (the rare second job)."""
    calls: list[set[Channel]] = []
    split = Ingest._split_summaries

    def spy(self, elements, channels):
        calls.append(set(channels))
        return split(self, elements, channels)

    monkeypatch.setattr(Ingest, "_split_summaries", spy)
    return calls


@pytest.mark.parametrize("flat", [False, True], ids=["grouped", "flat"])
def test_gaps_from_sp_seqs_and_from_the_window_conform(spark, tmp_path, windowed, flat) -> None:
    # ward-A: every declaration between two sps (the driver counts its gaps)
    clean = Feed("ward-A").sp(1).tuple(1).tuple(1).sp(2, "GP").tuple(2).tuple(2, 125).sp(3)
    # ward-B: an sp re-sent after its policy's first tuple (late) and a tuple going back to
    # the old declaration after a newer policy: declaration (1, 1) spans two sps
    split = Feed("ward-B").sp(1).tuple(1).sp(1).tuple(1).sp(2, "ND").tuple(1).tuple(2)
    split.tuple(2)
    elements = _interleaved(clean, split)
    labelled = spark_labelled(spark, tmp_path, [elements], server={}, flat=flat)
    assert windowed == [{Channel("HeartRate", "ward-B")}]
    for roles in ROLE_SETS:
        assert spark_outcome(labelled, roles) == reference(elements, roles, server={}), roles


@pytest.mark.parametrize("flat", [False, True], ids=["grouped", "flat"])
def test_gaps_across_batches_and_a_reset_mid_gap_conform(spark, tmp_path, windowed, flat) -> None:
    """A forged declaration resets its channel mid-gap (the rest of the gap is denied); the
    next batch continues from the saved state; neither batch needs the window."""
    feed = Feed("ward-C").sp(1).tuple(1).tuple(7).tuple(1).tuple(1)
    feed.sp(2, "GP").tuple(2).tuple(2)
    first = len(feed.elements)
    feed.tuple(2).sp(3, "ND").tuple(3).tuple(3, 125)
    elements = feed.elements
    batches = [elements[:first], elements[first:]]
    labelled = spark_labelled(spark, tmp_path, batches, server={}, flat=flat)
    assert windowed == []
    for roles in ROLE_SETS:
        assert spark_outcome(labelled, roles) == reference(elements, roles, server={}), roles


def test_the_collect_turns_flat_after_a_batch_of_one_declaration_per_tuple(spark, tmp_path) -> None:
    """The way of collecting follows the last batch: flat after one sp per tuple (every
    tuple its own declaration), grouped again after many tuples per declaration. Late
    tuples are left out of the summaries either way (out of order, deny)."""
    ingest = Ingest(spark, hospital.hierarchy(), STREAMS, {})
    store = StateStore(tmp_path / "state")
    every = Feed("ward-D")
    for ts in range(1, 6):
        every.sp(ts).tuple(ts)
    few = Feed("ward-D")
    few.seq = every.seq
    few.sp(6)
    for _ in range(12):
        few.tuple(6)
    assert not ingest.flat  # a fresh Ingest groups: it knows nothing of the batches yet
    seen = []
    for index, batch in enumerate([every.elements, few.elements, every.elements]):
        path = tmp_path / f"batch-{index}.jsonl"
        path.write_text("\n".join(to_line(e) for e in batch) + "\n")
        states = store.load(index)
        ingest.label_batch(spark.read.schema(ELEMENT_SCHEMA).json(str(path)), states)
        ingest.release()
        store.save(index, states)
        seen.append(ingest.flat)
    # the third batch replays the first one's seqs: all late, no declaration, grouped
    assert seen == [True, False, False]
