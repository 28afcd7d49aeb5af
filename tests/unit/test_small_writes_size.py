"""How a write decides it is small: the bytes of the files it reads (no JVM)."""

from __future__ import annotations

from streamshield.engine.store.small_writes import total_bytes


def test_bytes_are_counted_from_paths_and_file_uris(tmp_path) -> None:
    (tmp_path / "a b").mkdir()
    first, second = tmp_path / "a b" / "x.jsonl", tmp_path / "y.jsonl"
    first.write_bytes(b"x" * 300)
    second.write_bytes(b"y" * 200)
    assert total_bytes([first.as_uri(), str(second)], limit=10_000) == 500
    assert total_bytes([], limit=10) == 0


def test_unknown_or_past_the_limit_counts_as_large(tmp_path) -> None:
    big = tmp_path / "big"
    big.write_bytes(b"z" * 100)
    assert total_bytes([big] * 5, limit=150) > 150, "counting stops just past the limit"
    assert total_bytes([tmp_path / "gone"], limit=150) > 150, "a missing file is not small"
