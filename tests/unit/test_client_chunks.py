"""The CLI's ingest chunks: bounded bytes, line numbers of the file kept."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streamshield.client import _has_seqs, chunks


@given(st.lists(st.text(alphabet="ab\u00e9 ", max_size=40), max_size=60), st.integers(8, 64))
def test_chunks_cover_every_line_once_in_order_within_the_limit(lines, limit) -> None:
    seen: list[str] = []
    too_long: list[int] = []
    for first, batch, long_ones in chunks(lines, limit):
        assert first == len(seen) + 1  # each chunk starts where the last one ended
        assert sum(len(line.encode()) + 1 for line in batch) <= limit
        assert all(first <= n < first + len(batch) for n in long_ones)
        seen += batch
        too_long += long_ones
    assert len(seen) == len(lines)
    for number, line in enumerate(lines, 1):
        if number in too_long:
            assert seen[number - 1] == "" and len(line.encode()) + 1 > limit
        else:
            assert seen[number - 1] == line


def test_lines_with_a_seq_are_told_from_plain_rows() -> None:
    assert _has_seqs(['{"values": {}}', '{"seq": 3, "values": {}}'])
    assert not _has_seqs(['{"values": {"seq": 3}}', 'not json with "seq"', ""])
