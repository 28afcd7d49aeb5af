"""The reference ``[ROWS n]`` (lang/windows.py): the n latest tuples of the stream in its
one order across channels, n in all.

Why a property: the order is a decision (ingest batch, then channel, then seq), and the
engine sorts the same columns (engine/queries/window_state.py ORDER); these pin what the
reference means so that the Spark conformance test (tests/spark/test_rows_windows.py)
has a fixed target.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streamshield.engine.queries.window_state import ORDER
from streamshield.lang.windows import ROW_ORDER, StreamPosition, latest_rows

channels = st.sampled_from([("s", "a"), ("s", "b"), ("s", "c")])
# per ingest batch, the tuples landed on each channel (counts), in order
batches = st.lists(st.lists(st.tuples(channels, st.integers(0, 4)), max_size=4), max_size=6)


def positions(plan: list[list[tuple[tuple[str, str], int]]]) -> list[StreamPosition]:
    """Positions of tuples landed batch by batch, each channel's seq counting on."""
    seqs: dict[tuple[str, str], int] = {}
    out = []
    for batch, landings in enumerate(plan):
        for (stream, provider), count in landings:
            for _ in range(count):
                seqs[(stream, provider)] = seqs.get((stream, provider), 0) + 1
                out.append(StreamPosition(batch, stream, provider, seqs[(stream, provider)]))
    return out


@given(batches, st.integers(0, 12))
def test_rows_holds_n_in_all_the_latest_of_the_stream(plan, n) -> None:
    every = positions(plan)
    window = latest_rows(every, n)
    assert len(window) == min(n, len(every))
    assert all(old < new for old in set(every) - set(window) for new in window)


@given(batches, st.integers(1, 12))
def test_a_later_ingest_batch_is_later_whatever_its_channel(plan, n) -> None:
    """Arrival order across channels: a tuple labelled in a later batch is later, so a
    window holding a tuple of one batch holds every tuple of the batches after it."""
    every = positions(plan)
    window = set(latest_rows(every, n))
    for p in window:
        assert all(q in window for q in every if q.ingest > p.ingest)


@given(batches, st.integers(1, 12))
def test_each_channel_keeps_its_seq_order(plan, n) -> None:
    """Within a channel the stream's order is seq's: a window never holds a tuple of a
    channel without its channel's later ones."""
    every = positions(plan)
    window = set(latest_rows(every, n))
    for p in window:
        later = [q for q in every if (q.stream, q.provider) == (p.stream, p.provider)]
        assert all(q in window for q in later if q.seq > p.seq)


@given(batches, st.integers(1, 12), st.integers(0, 12))
def test_the_n_latest_of_the_m_latest_are_the_n_latest(plan, n, extra) -> None:
    """Why one node serves every size (network/window_sharing.py)."""
    every = positions(plan)
    assert latest_rows(latest_rows(every, n + extra), n) == latest_rows(every, n)


def test_the_testers_case_two_channels_at_two_levels() -> None:
    """[1, ⊥] ids 1-150 in one batch, then public ids 3001-3050 in the next: 100 latest
    are 101-150 and the 50 public ones (per channel it was 51-150 and the 50)."""
    first = [StreamPosition(0, "MessageLog", "company1", seq) for seq in range(1, 151)]
    then = [StreamPosition(1, "MessageLog", "pub", seq) for seq in range(1, 51)]
    window = latest_rows([*first, *then], 100)
    assert len(window) == 100
    assert window[0] == StreamPosition(0, "MessageLog", "company1", 101)


def test_the_engine_sorts_on_the_reference_fields() -> None:
    assert tuple(StreamPosition.__dataclass_fields__) == ROW_ORDER
    assert ORDER[1:] == ROW_ORDER[1:] and ORDER[0] == "_ss_ingest"
