"""The history lint: it flags each pattern of prose that says when, and passes clean text.

The sample texts are built from pieces so that this file's own docstrings and comments
stay clean under the lint they test.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tools import history_lint

S = "session"
ISSUE = "issue"
DATE = "2026" + "-11-03"


def _rules(findings: list[history_lint.Finding]) -> set[str]:
    return {finding.rule.name for finding in findings}


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        (f"Measured in {S} 21 on two cores.", "session number"),
        (f"Tried and dropped in {S}s 19 and 20.", "session number"),
        ("The s14 run kept the old plan.", "run tag"),
        (f"Shared query networks ({ISSUE} 12, item 5).", "issue number"),
        ("The join planner (see #42) merges nodes.", "issue reference"),
        ("The fix-" + "fanout branch merged the passes.", "branch name"),
        ("Before this change the scan ran twice.", "before/after the change"),
        ("After the change one job runs per batch.", "before/after the change"),
        ("Delivery used to read the files back.", "past habit"),
        (f"Measured on {DATE}: p50 1.6 s.", "date"),
    ],
)
def test_markdown_line_with_history_is_flagged(text: str, rule: str) -> None:
    findings = history_lint.check_markdown("docs/x.md", text)
    assert rule in _rules(findings)
    assert all(f.path == "docs/x.md" and f.line == 1 for f in findings)


def test_clean_text_passes() -> None:
    text = (
        "One job per batch instead of one per branch: 16 branches cost 7x one in jobs\n"
        "alone (`python -m bench.branch_passes`). The key can be used to sign a token;\n"
        "it is never used to check one. Spark refused to commit; sessions expire after 8 h.\n"
        "Issues of the wire format are listed in docs/wire-format.md, s3 is a bucket.\n"
    )
    assert history_lint.check_markdown("docs/x.md", text) == []
    assert history_lint.check_python("src/x.py", f'"""{text}"""\n') == []


def test_pattern_broken_over_two_lines_is_found_once() -> None:
    text = f"The scan was tried in {S}\n21 and kept.\n"
    findings = history_lint.check_markdown("docs/x.md", text)
    assert [(f.line, f.rule.name) for f in findings] == [(1, "session number")]


def test_python_comments_docstrings_and_names_are_read() -> None:
    source = (
        f'"""Module docstring ({ISSUE} 13)."""\n'
        "\n"
        f"X = 1  # tuned in {S} 20\n"
        "\n"
        "\n"
        "def test_fanout_s21_shape() -> None:\n"
        f'    """Its docstring: {DATE}."""\n'
    )
    findings = history_lint.check_python("tests/x.py", source)
    assert {(f.line, f.rule.name) for f in findings} == {
        (1, "issue number"),
        (3, "session number"),
        (6, "run tag in a name"),
        (7, "date"),
    }


def test_python_string_data_is_not_read() -> None:
    """Dates and tags in string literals are data (fixtures, file names, SQL)."""
    source = (
        f'EXPIRES = "{DATE}T13:00:00Z"\n'
        f'NAME = "results-{S}-s21.json"\n'
        f'CALL = f(since="{DATE}", tag="#12")\n'
    )
    assert history_lint.check_python("tests/x.py", source) == []


def test_dates_in_markdown_code_blocks_are_examples() -> None:
    text = f"Audit rows:\n\n```\n{DATE}T10:00:00Z login alice\n```\n"
    assert history_lint.check_markdown("docs/x.md", text) == []
    assert _rules(history_lint.check_markdown("docs/x.md", f"Run on {DATE}.")) == {"date"}


def test_allow_list_covers_only_its_path_and_rule() -> None:
    source = f'"""Migration.\n\nCreate Date: {DATE}\n"""\n'
    migration = "src/streamshield/catalog/migrations/versions/0009_x.py"
    assert history_lint.check_python(migration, source) == []
    assert _rules(history_lint.check_python("src/streamshield/x.py", source)) == {"date"}
    every_reason_given = all(reason for _, _, reason in history_lint.ALLOWED)
    assert every_reason_given


def test_message_names_file_line_what_and_why(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(f"Intro.\nMeasured in {S} 21.\n")
    (finding,) = history_lint.check_file(doc, root=tmp_path)
    message = str(finding)
    assert message.startswith("doc.md:2: session number")
    assert "say what it does and why" in message
    assert history_lint.main([str(doc)]) == 1


def test_main_passes_a_clean_file(tmp_path: Path) -> None:
    clean = tmp_path / "clean.py"
    clean.write_text('"""One job per batch: fewer jobs than branches."""\n')
    assert history_lint.main([str(clean)]) == 0


def test_the_python_sources_tell_no_history() -> None:
    """src, tests, tools and bench/*.py pass the lint (``make lint`` also reads the docs)."""
    sources = [
        path
        for path in history_lint.repository_files()
        if path.suffix == ".py" and "site-packages" not in path.parts
    ]
    assert len(sources) > 100
    findings = [str(f) for path in sources for f in history_lint.check_file(path)]
    assert findings == []
