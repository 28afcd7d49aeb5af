"""The per-role protection engine on Spark answers the conformance cases exactly as the
oracle does over the role's protected copy (paper 4, section IV).

One streaming query runs every pattern of the cases (a union) over the role's protected
file sources: two batches of data, one that moves the watermark past every window.
"""

from __future__ import annotations

import copy
import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from streamshield.cep.event_files import comparable, write_batch
from streamshield.cep.oracle import Event
from streamshield.cep.pattern import compile_pattern
from streamshield.cep.rule_book import RuleBook
from streamshield.cep.running import RunningPattern
from streamshield.cep.spark_protection import compile_protected
from streamshield.engine.levels.level_processor import LevelProcessors
from streamshield.policy.cep_rules_text import loads
from tests.conformance import cep_protection as case
from tests.spark.cep_runs import run_patterns

pytestmark = pytest.mark.spark


def write(root: Path, number: int, events: list[Event]) -> None:
    write_batch(root, number, events, case.TYPES)


def test_protected_patterns_match_the_oracle(spark, tmp_path) -> None:
    root = tmp_path / "bus"
    shutil.rmtree(root, ignore_errors=True)
    for type_ in case.TYPES:
        (root / type_).mkdir(parents=True)
    sources = {t: spark.readStream.schema(case.DDL).json(str(root / t)) for t in case.TYPES}
    frames = {
        name: compile_protected(
            compile_pattern(text, case.TYPES),
            case.ACCESS,
            case.HIERARCHY,
            case.ROLES_OF.get(name, case.ROLES),
            sources,
            delay=case.DELAY,
        )
        for name, text in case.PATTERNS.items()
    }
    batches = [*case.fixed_batches(), case.flush()]
    got = run_patterns(
        spark, frames, tmp_path / "checkpoint", batches, lambda n, b: write(root, n, b)
    )
    expected = case.expected(case.fixed_batches())
    for name in case.PATTERNS:
        rows = [r for r in got[name] if -1 not in r]  # the flush events' own rows
        want = [tuple(map(comparable, r)) for r in expected[name]]
        assert Counter(rows) == Counter(want), name


def _rules(change) -> object:
    document = copy.deepcopy(case.RULES)
    change(document["roles"])
    return loads(json.dumps(document), case.HIERARCHY)


def test_rule_changes_apply_from_the_next_micro_batch(spark, tmp_path) -> None:
    """Narrowing a Phi condition restarts the pattern under the new protection (the
    batch that saw the change is recomputed, nothing of it delivered under the old
    rules); denying an attribute the pattern reads stops it with the reason. On the way,
    the pattern moves to another storage layout (its checkpoint adopted from where it
    was, as after the move of patterns into their level's directory) and resumes."""
    root = tmp_path / "bus"
    for type_ in case.TYPES:
        (root / type_).mkdir(parents=True)
    book = RuleBook(case.ACCESS, case.HIERARCHY)
    delivered: list[list[tuple]] = []

    def pattern(storage: str, earlier=None) -> RunningPattern:
        return RunningPattern(
            compile_pattern(case.PATTERNS["seq"], case.TYPES),
            case.ROLES,
            book,
            lambda processor, _roles: {
                t: processor.session.readStream.schema(case.DDL).json(str(root / t))
                for t in case.TYPES
            },
            lambda rows: delivered.append(sorted(tuple(r.values()) for r in rows)),
            name="seq",
            processors=LevelProcessors(spark, tmp_path / storage),
            delay=case.DELAY,
            earlier=earlier,
        )

    running = pattern("old")
    ev = case.event
    running.start()
    try:
        write(root, 0, [ev("A", 1, 1.5, 1, 5, 0), ev("B", 2, 2.5, 1, 4, 0)])
        running.process()
        assert [r for b in delivered for r in b] == [(1, 2, 5, 1)]
        delivered.clear()
        running.stop()
        old, running = running.checkpoint, pattern("new", earlier=running.checkpoint)
        running.start()
        running.process()
        assert not old.exists() and running.checkpoint.is_relative_to(tmp_path / "new")
        assert not [r for b in delivered for r in b]  # resumed: batch 0 not read again

        def narrow(roles) -> None:  # A.v now readable only where k = 2
            roles["staff"]["A"][1]["condition"] = [["k", "=", 2]]

        book.replace(_rules(narrow))
        write(
            root,
            1,
            [
                ev("A", 3, 20.5, 1, 6, 0),  # matched B 4 under the old rules: not now
                ev("B", 4, 21.5, 1, 9, 0),
                ev("A", 5, 22.5, 2, 7, 0),
                ev("B", 6, 23.5, 2, 8, 0),
            ],
        )
        running.process()
        assert running.restarts == 1 and running.status == "running"
        assert [r for b in delivered for r in b] == [(5, 6, 7, 2)]
        delivered.clear()

        def revoke(roles) -> None:  # B.k, which the pattern joins on, now denied
            roles["analyst"]["B"][1]["operator"] = "psi"
            del roles["analyst"]["B"][1]["condition"]

        book.replace(_rules(revoke))
        write(root, 2, [ev("A", 7, 40.5, 2, 9, 0), ev("B", 8, 41.5, 2, 9, 0)])
        running.process()
        assert running.status == "stopped"
        assert "B.k" in running.reason and "denied" in running.reason
        assert not [r for b in delivered for r in b]
    finally:
        running.stop()
