"""A pattern's checkpoint kept where the layout before level processors put it
(``<root>/cep/checkpoints/<name>``) moves into its level's directory at its next start,
so that it resumes rather than reading every event again (no JVM: files only)."""

from __future__ import annotations

from streamshield.cep.running import adopt


def test_an_earlier_checkpoint_moves_in_once(tmp_path) -> None:
    earlier = tmp_path / "cep" / "checkpoints" / "fire"
    (earlier / "offsets").mkdir(parents=True)
    (earlier / "offsets" / "0").write_text("v1")
    checkpoint = tmp_path / "store" / "levels" / "level-x" / "patterns" / "fire"
    assert adopt(earlier, checkpoint)
    assert (checkpoint / "offsets" / "0").read_text() == "v1" and not earlier.exists()
    assert not adopt(earlier, checkpoint)  # nothing left to move


def test_a_checkpoint_in_place_is_never_replaced(tmp_path) -> None:
    earlier, checkpoint = tmp_path / "old", tmp_path / "new"
    (earlier / "offsets").mkdir(parents=True)
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "offsets" / "7").write_text("newer")
    assert not adopt(earlier, checkpoint)
    assert (checkpoint / "offsets" / "7").read_text() == "newer" and earlier.exists()
    assert not adopt(tmp_path / "missing", tmp_path / "other")
    assert not (tmp_path / "other").exists()
