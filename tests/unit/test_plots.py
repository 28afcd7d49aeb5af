"""The figure convention of bench/plots.py: spreads, panel letters, paper cells, and the
generated block of docs/experiments.md that must never eat the hand-written text."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench.plots import Claim, Panel, PaperPoint, Series, lettered, panel_table, replace_block


def panel(title: str = "t") -> Panel:
    return Panel(
        title,
        "roles",
        "ms",
        [1, 500],
        [Series("ours", [[3.0, 1.0, 2.0], [9.0]])],
        paper=[PaperPoint(500, 11.31, "x")],
        claims=[Claim(0.5, 2, True, "up")],
    )


def test_table_shows_median_min_max_and_the_papers_value_or_claim() -> None:
    table = panel_table([panel()])
    assert "| 1 | 2 [1-3] (n=3) | up (text) |" in table
    assert "| 500 | 9 (n=1) | 11.3 (text) |" in table


def test_panel_letters_are_distinct_and_in_order() -> None:
    titles = lettered([panel("a"), panel("b"), panel("c")])
    assert [t[:3] for t in titles] == ["(a)", "(b)", "(c)"]
    with pytest.raises(ValueError):
        lettered([panel()] * 27)


def test_replace_block_keeps_the_hand_written_text(tmp_path: Path) -> None:
    doc = tmp_path / "experiments.md"
    doc.write_text("# Title\n\nbefore\n")
    replace_block(doc, "fig13", "first")
    doc.write_text(doc.read_text() + "\nafter, by hand\n")
    replace_block(doc, "fig13", "second")
    replace_block(doc, "fig14", "other")
    text = doc.read_text()
    assert "first" not in text and text.count("second") == 1
    assert text.index("before") < text.index("second") < text.index("after, by hand")
    assert text.index("after, by hand") < text.index("other")
