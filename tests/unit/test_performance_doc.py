"""The benches' outputs: one current results file per bench, and the measured tables in
docs/performance.md, where the README sends its readers.

A bench that writes its table into a document without its markers fails rather than
guessing, so the default document must carry every marked block and heading the benches
replace; a second results file per bench would leave readers to guess which is current.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from bench import reliability_report, served_load, table13

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "performance.md"


def _has_block(text: str, begin: str, end: str) -> bool:
    return 0 <= text.find(begin) < text.find(end)


def test_table13_writes_its_table_and_sections_into_the_performance_doc() -> None:
    assert Path(table13.parse([]).doc) == DOC
    text = DOC.read_text()
    assert _has_block(text, table13.MARK_BEGIN, table13.MARK_END)
    lines = text.splitlines()
    assert table13.HEADING in lines and table13.GROWTH_HEADING in lines


def test_served_load_writes_its_table_into_the_performance_doc() -> None:
    assert Path(served_load.parse([]).doc) == DOC
    assert Path(served_load.parse([]).out) == ROOT / "bench" / "results" / "served-load.json"
    assert _has_block(DOC.read_text(), served_load.MARK_BEGIN, served_load.MARK_END)


def test_the_kafka_bench_writes_its_table_into_the_performance_doc() -> None:
    from bench import kafka_source

    assert _has_block(DOC.read_text(), kafka_source.MARK_BEGIN, kafka_source.MARK_END)
    assert kafka_source.RESULTS.parent == ROOT / "bench" / "results"


def test_served_load_replaces_only_its_block_and_refuses_a_doc_without_it(
    tmp_path: Path,
) -> None:
    doc = tmp_path / "performance.md"
    doc.write_text(f"above\n{served_load.MARK_BEGIN}\nSTALE\n{served_load.MARK_END}\nbelow\n")
    new = f"{served_load.MARK_BEGIN}\nNEW\n{served_load.MARK_END}"
    served_load.write_block(doc, new)
    assert doc.read_text() == f"above\n{new}\nbelow\n"
    doc.write_text("no markers\n")
    with pytest.raises(ValueError, match="no"):
        served_load.write_block(doc, "x")
    assert doc.read_text() == "no markers\n"


def test_reliability_figures_go_to_the_performance_doc_from_one_file_per_catalog() -> None:
    assert _has_block(
        DOC.read_text(), "<!-- reliability:figures -->", "<!-- /reliability:figures -->"
    )
    assert reliability_report.BENCH == ROOT / "bench" / "results"
    table = reliability_report.crash_table()
    assert "| sqlite |" in table and "| postgresql |" in table


def test_the_readme_holds_no_bench_table() -> None:
    readme = (ROOT / "README.md").read_text()
    for marker in (table13.MARK_BEGIN, served_load.MARK_BEGIN, "<!-- reliability:figures -->"):
        assert marker not in readme, marker
    assert "docs/performance.md" in readme


def test_one_results_file_per_bench_under_bench_results() -> None:
    bench = ROOT / "bench"
    assert not sorted(p.name for p in bench.glob("results*.*")), "results outside results/"
    names = sorted(p.name for p in (bench / "results").iterdir())
    assert names and all(n.endswith((".json", ".md")) for n in names), names
    assert not [n for n in names if n.startswith("results")], names


def test_the_readme_is_short_and_has_the_long_modes_the_skip_reasons_name() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) < 200
    assert "## Long modes" in lines  # tests/conftest.py's skip reason points there
