"""Fail on prose that says *when* instead of *what and why*.

Code, docs and test names describe the software as it is. A numbered work period, a
run tag in a name, an issue or branch named as the provenance of a design, a dated run
narrative or a sentence about how the code was before stops being true, or meaningful, the
moment it is merged: the reader needs the mechanism and the measured reason, not the
history, which git keeps. ``PROSE_RULES`` and ``NAME_RULES`` are the patterns.

What is read, so that data is not mistaken for prose:

* Python (``src/``, ``tests/``, ``bench/*.py``, ``tools/``): comments, docstrings and
  identifiers. Other string literals are data (dates in fixtures, SQL, file names) and
  are not read.
* Markdown (``docs/``, ``README.md``): every line; dates inside fenced code blocks are
  example output (data) and are not read.

``ALLOWED`` lists the few places where a matching text is data, each with its reason.
Run ``python -m tools.history_lint`` (exit status 1 and one ``file:line: what (why)`` line
per finding) or ``python -m tools.history_lint FILE...``.
"""

from __future__ import annotations

import io
import re
import sys
import tokenize
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Rule:
    """One pattern of history in prose, and why it has no place there."""

    name: str
    pattern: re.Pattern[str]
    why: str
    unless_after: re.Pattern[str] | None = None
    """A match is no finding when the text before it ends with this."""


def _rule(name: str, pattern: str, why: str, unless_after: str | None = None) -> Rule:
    unless = re.compile(unless_after + r"$", re.IGNORECASE) if unless_after else None
    return Rule(name, re.compile(pattern, re.IGNORECASE), why, unless)


WORK_PERIOD = "a work period is not a property of the code: say what it does and why"
PROVENANCE = "an issue or branch is history, kept by git: say what the design is and why"
CHANGE = "a before/after sentence stops being true once merged: describe the code as it is"
DATED = "a dated run narrative goes stale: give the measured figure and its command"

# Rules for prose: comments, docstrings, Markdown.
PROSE_RULES: tuple[Rule, ...] = (
    _rule("session number", r"\bsessions? \d+", WORK_PERIOD),
    _rule("run tag", r"\bs\d{2}\b", WORK_PERIOD),
    _rule("issue number", r"\bissues? \d+", PROVENANCE),
    _rule("issue reference", r"(?<![\w&/])#\d+\b", PROVENANCE),
    _rule("branch name", r"\bfix-[a-z][\w-]*", PROVENANCE),
    _rule(
        "before/after the change", r"\b(before|after|until|since) (this|the|that) change", CHANGE
    ),
    # The past of a habit is flagged; the passive voice (is never used, can be used) is not.
    _rule(
        "past habit",
        r"\bused to\b",
        CHANGE,
        unless_after=r"\b(?:be|is|are|was|were|been|being|gets?|got)\s+(?:\w+\s+)?",
    ),
    _rule("date", r"\b20\d\d-[01]\d-[0-3]\d\b", DATED),
)

# Rules for identifiers (test names, functions, variables): ``_`` separates the words.
NAME_RULES: tuple[Rule, ...] = (
    _rule("session number in a name", r"(?:^|_)sessions?_?\d+(?:_|$)", WORK_PERIOD),
    _rule("run tag in a name", r"(?:^|_)s\d{2}(?:_|$)", WORK_PERIOD),
    _rule("issue number in a name", r"(?:^|_)issues?_?\d+(?:_|$)", PROVENANCE),
    _rule("before/after in a name", r"(?:^|_)(?:before|after)_(?:this|the)_change", CHANGE),
)

DATE_RULE = "date"

# (path relative to the repository, rule name, reason): matches there are data.
ALLOWED: tuple[tuple[str, str, str], ...] = (
    (
        "src/streamshield/catalog/migrations/versions/",
        DATE_RULE,
        "Alembic's revision header records its creation date as data",
    ),
)

PYTHON_ROOTS = ("src", "tests", "bench", "tools")
MARKDOWN_ROOTS = ("docs", "README.md")


@dataclass(frozen=True)
class Finding:
    """One line that tells history, and the rule it breaks."""

    path: str
    line: int
    rule: Rule
    text: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.rule.name} {self.text!r} ({self.rule.why})"


def _allowed(path: str, rule: Rule) -> bool:
    return any(path.startswith(prefix) and rule.name == name for prefix, name, _ in ALLOWED)


def _match(path: str, line: int, text: str, rules: Iterable[Rule]) -> Iterator[Finding]:
    for rule in rules:
        if _allowed(path, rule):
            continue
        for found in rule.pattern.finditer(text):
            if rule.unless_after and rule.unless_after.search(text[: found.start()]):
                continue
            yield Finding(path, line, rule, found.group(0))


def _joined(line: str, following: str | None) -> str:
    """A line with the next line's first word: sentences wrap over lines."""
    if not following:
        return line
    return f"{line} {following.lstrip(' #').split(' ', 1)[0]}"


def _lines(
    path: str, first_line: int, lines: list[str], rules: list[tuple[Rule, ...]]
) -> Iterator[Finding]:
    """Each line read with the next line's first word, so a pattern broken over two
    lines is caught, and reported once, on the line it starts."""
    for offset, line in enumerate(lines):
        following = lines[offset + 1] if offset + 1 < len(lines) else None
        for finding in _match(path, first_line + offset, _joined(line, following), rules[offset]):
            if finding.text in line or not following or finding.text not in following:
                yield finding


def _prose(path: str, first_line: int, text: str, rules: tuple[Rule, ...]) -> Iterator[Finding]:
    lines = text.splitlines() or [""]
    return _lines(path, first_line, lines, [rules] * len(lines))


def check_python(path: str, source: str) -> list[Finding]:
    """Comments, docstrings and identifiers of one Python source."""
    findings: list[Finding] = []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return check_markdown(path, source)
    previous = tokenize.NEWLINE
    depth = 0
    for token in tokens:
        kind = token.type
        if kind == tokenize.OP and token.string in "([{":
            depth += 1
        elif kind == tokenize.OP and token.string in ")]}":
            depth -= 1
        if kind == tokenize.COMMENT:
            findings.extend(_prose(path, token.start[0], token.string, PROSE_RULES))
        elif (
            kind == tokenize.STRING
            and depth == 0
            and previous
            in (
                tokenize.NEWLINE,
                tokenize.NL,
                tokenize.INDENT,
                tokenize.DEDENT,
                tokenize.ENCODING,
            )
        ):
            # A string standing alone as a statement: a docstring.
            findings.extend(_prose(path, token.start[0], token.string, PROSE_RULES))
        elif kind == tokenize.NAME:
            findings.extend(_match(path, token.start[0], token.string, NAME_RULES))
        if kind != tokenize.COMMENT:
            previous = kind
    return findings


def check_markdown(path: str, text: str) -> list[Finding]:
    """Every line of a Markdown text; dates in fenced code blocks are examples."""
    in_code = False
    outside = PROSE_RULES
    inside = tuple(rule for rule in PROSE_RULES if rule.name != DATE_RULE)
    lines = text.splitlines()
    rules: list[tuple[Rule, ...]] = []
    for line in lines:
        fence = line.lstrip().startswith(("```", "~~~"))
        if fence:
            in_code = not in_code
        rules.append(inside if in_code or fence else outside)
    return list(_lines(path, 1, lines, rules))


def check_file(file: Path, root: Path = ROOT) -> list[Finding]:
    """The findings of one file, by its suffix."""
    try:
        path = file.resolve().relative_to(root).as_posix()
    except ValueError:
        path = file.as_posix()
    text = file.read_text(encoding="utf-8")
    if file.suffix == ".py":
        return check_python(path, text)
    return check_markdown(path, text)


def repository_files(root: Path = ROOT) -> list[Path]:
    """The files the house rule covers: Python sources and the Markdown docs."""
    files: list[Path] = []
    for top in PYTHON_ROOTS:
        base = root / top
        if top == "bench":
            files.extend(sorted(base.glob("*.py")))
        elif base.is_dir():
            files.extend(sorted(base.rglob("*.py")))
    for top in MARKDOWN_ROOTS:
        base = root / top
        if base.is_file():
            files.append(base)
        elif base.is_dir():
            files.extend(sorted(base.rglob("*.md")))
    return files


def main(argv: list[str] | None = None) -> int:
    """Print every finding; exit 1 if there is any."""
    args = sys.argv[1:] if argv is None else argv
    files = [Path(a) for a in args] if args else repository_files()
    findings = [finding for file in files for finding in check_file(file)]
    for finding in findings:
        print(finding)
    if findings:
        print(
            f"history lint: {len(findings)} finding(s). Describe the software as it is and "
            "say why, never when (tools/history_lint.py lists the rules).",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
