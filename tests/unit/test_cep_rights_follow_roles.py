"""A pattern's rules are read under the roles of now, never those of its start.

The rule book asks its rights source for the hierarchy at every read, and its stamp moves
with every change of roles; a running pattern's protection holds its effective roles
and is derived from the roles its owner may still act with, so that a removed edge, a
role taken away or a right lost each change what the pattern's next micro-batch is
checked against (tests/server/test_role_changes.py runs the same through the server).
"""

from __future__ import annotations

import json
from typing import Any, cast

import pytest

from streamshield.cep.pattern import compile_pattern
from streamshield.cep.rule_book import RuleBook
from streamshield.cep.running import RunningPattern
from streamshield.cep.validation import PatternRefused
from streamshield.policy.cep_rules_text import loads
from streamshield.policy.roles import RoleHierarchy

TYPES = {"Door": {"ts": "timestamp", "room": "string", "person": "string"}}
RULES = {
    "event_types": TYPES,
    "roles": {"JUNX": {"Door": [{"operator": "xi", "attributes": "*"}]}},
}
ROLES = ["JUNX", "SENX", "OTHER"]
WITH_EDGE = RoleHierarchy.build(ROLES, [("SENX", "JUNX")], order=ROLES)
WITHOUT_EDGE = RoleHierarchy.build(ROLES, [], order=ROLES)
ACCESS = loads(json.dumps(RULES), WITH_EDGE)
TEXT = "PATTERN SEQ(Door a, Door b) WHERE a.room = b.room WITHIN 1 MINUTE RETURN b.person"


class Roles:
    """A stand-in for the server's rights: a stamp and the hierarchy of now."""

    def __init__(self) -> None:
        self.stamp, self.hierarchy = 0, WITH_EDGE

    def change(self, hierarchy: RoleHierarchy) -> None:
        self.stamp, self.hierarchy = self.stamp + 1, hierarchy

    def __call__(self) -> tuple[int, RoleHierarchy]:
        return self.stamp, self.hierarchy


def _running(book: RuleBook, roles: tuple[str, ...], acting: Any = None) -> RunningPattern:
    """A pattern that is never started: its checks need no Spark."""
    return RunningPattern(
        compile_pattern(TEXT, TYPES),
        roles,
        book,
        lambda _processor, _roles: {},
        lambda _rows: None,
        name="p",
        processors=cast(Any, None),
        delay=cast(Any, None),
        acting=acting,
    )


def test_the_book_reads_the_hierarchy_of_now_and_its_stamp_moves_with_it() -> None:
    roles = Roles()
    book = RuleBook(ACCESS, roles)
    first = book.current()
    assert first.hierarchy is WITH_EDGE
    roles.change(WITHOUT_EDGE)
    second = book.current()
    assert second.hierarchy is WITHOUT_EDGE and second.stamp != first.stamp
    assert second.version == first.version  # the rules themselves did not change
    third = book.replace(ACCESS)
    assert third.version == second.version + 1 and third.hierarchy is WITHOUT_EDGE


def test_a_fixed_hierarchy_keeps_one_stamp() -> None:
    book = RuleBook(ACCESS, WITH_EDGE)
    assert book.current().hierarchy is WITH_EDGE
    assert book.current().stamp == book.current().stamp


def test_a_removed_edge_makes_the_seniors_pattern_illegal() -> None:
    roles = Roles()
    book = RuleBook(ACCESS, roles)
    running = _running(book, ("SENX",))
    before = running.protection(book.current())
    assert before[2] == {"SENX", "JUNX"}
    roles.change(WITHOUT_EDGE)
    with pytest.raises(PatternRefused, match="Door"):
        running.protection(book.current())
    roles.change(WITH_EDGE)  # the edge back: legal again, the same protection
    assert running.protection(book.current()) == before


def test_the_effective_roles_are_part_of_the_protection() -> None:
    """JUNX's own pattern keeps its rules when SENX loses JUNX, but a senior whose
    reach changes (its sources are read through another view) gets another plan."""
    hierarchy = RoleHierarchy.build(ROLES, [("SENX", "JUNX"), ("OTHER", "JUNX")], order=ROLES)
    roles = Roles()
    roles.hierarchy = hierarchy
    book = RuleBook(ACCESS, roles)
    other = _running(book, ("OTHER",))
    junior = _running(book, ("JUNX",))
    before, junior_before = other.protection(book.current()), junior.protection(book.current())
    roles.change(RoleHierarchy.build(ROLES, [("SENX", "JUNX")], order=ROLES))
    assert junior.protection(book.current()) == junior_before
    with pytest.raises(PatternRefused):
        other.protection(book.current())
    assert before[2] == {"OTHER", "JUNX"}


def test_the_roles_it_runs_with_are_those_its_owner_still_acts_with() -> None:
    book = RuleBook(ACCESS, Roles())
    held = {"JUNX", "OTHER"}
    running = _running(book, ("JUNX", "OTHER"), acting=lambda: held)
    assert running.roles_now() == {"JUNX", "OTHER"}
    held.discard("JUNX")
    assert running.roles_now() == {"OTHER"}
    with pytest.raises(PatternRefused, match="Door"):  # OTHER has no rules
        running.protection(book.current(), running.roles_now())
    held.clear()
    with pytest.raises(PatternRefused, match="none of the roles"):
        running.protection(book.current(), running.roles_now())


def test_an_owner_who_lost_a_right_refuses_the_pattern() -> None:
    def lost() -> frozenset[str]:
        raise PatternRefused("its owner no longer holds READ on Door")

    running = _running(RuleBook(ACCESS, Roles()), ("JUNX",), acting=lost)
    with pytest.raises(PatternRefused, match="READ on Door"):
        running.roles_now()
