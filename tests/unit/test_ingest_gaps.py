"""Secure ingest's gaps from the sps' seqs equal the window's (engine/ingest/ingest.gap_summaries).

The window numbers every element of a channel in seq order and counts the sps up to it;
``gap_summaries`` sees only one summary per declaration and the sps' seqs. It must give
the window's per-gap summaries for every channel it keeps, and hand back exactly the
channels where some declaration lies on both sides of an sp (those need the window).
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streamshield.engine.ingest.ingest import gap_summaries
from streamshield.policy.elements import Channel

CHANNELS = [Channel("HeartRate", "a"), Channel("HeartRate", "b"), Channel("Pulse", "a")]
DECLARATIONS = st.sampled_from([(1, 1), (1, 2), (2, 1), (3, 1), (None, None), (1, None)])


@st.composite
def batches(draw) -> dict[Channel, list[tuple]]:
    """Per channel, its elements in seq order: ("sp", seq) or ("t", seq, ts, csn)."""
    out = {}
    for channel in draw(st.lists(st.sampled_from(CHANNELS), unique=True, max_size=3)):
        seq, elements = draw(st.integers(-5, 50)), []
        for kind in draw(st.lists(st.sampled_from(["sp", "t", "t", "t"]), max_size=30)):
            seq += draw(st.integers(1, 3))
            if kind == "sp":
                elements.append(("sp", seq))
            else:
                elements.append(("t", seq, *draw(DECLARATIONS)))
        out[channel] = elements
    return out


def _window(channel: Channel, elements: list[tuple]) -> list[dict]:
    """What the window and the per-gap aggregate give for one channel."""
    groups: dict[tuple, list[int]] = {}
    gap = 0
    for element in elements:
        if element[0] == "sp":
            gap += 1
            continue
        _, seq, ts, csn = element
        groups.setdefault((gap, ts, csn), []).append(seq)
    return [
        {"stream": channel.stream, "provider": channel.provider, "gap": g, "p_ts": ts}
        | {"p_csn": csn, "first": min(seqs), "last": max(seqs)}
        for (g, ts, csn), seqs in groups.items()
    ]


def _declarations(channel: Channel, elements: list[tuple]) -> list[dict]:
    groups: dict[tuple, list[int]] = {}
    for element in elements:
        if element[0] == "t":
            groups.setdefault(element[2:], []).append(element[1])
    return [
        {"stream": channel.stream, "provider": channel.provider, "p_ts": ts, "p_csn": csn}
        | {"first": min(seqs), "last": max(seqs)}
        for (ts, csn), seqs in groups.items()
    ]


def _key(summary: dict) -> tuple:
    return tuple(repr(summary[k]) for k in sorted(summary))


@given(batch=batches())
def test_gaps_from_sp_seqs_equal_the_windows(batch) -> None:
    seqs = {c: [e[1] for e in elements if e[0] == "sp"] for c, elements in batch.items()}
    declared = [d for c, elements in batch.items() for d in _declarations(c, elements)]
    kept, split = gap_summaries(seqs, declared)
    for channel, elements in batch.items():
        expected = _window(channel, elements)
        spans = {(s["p_ts"], s["p_csn"]) for s in expected}
        split_needed = len(spans) < len(expected)  # a declaration in two gaps or more
        assert (channel in split) == split_needed
        got = [s for s in kept if Channel(s["stream"], s["provider"]) == channel]
        if not split_needed:
            assert sorted(map(_key, got)) == sorted(map(_key, expected))
        else:
            assert got == []
