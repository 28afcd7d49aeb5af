"""Per-role event attribute operators (paper 4, Definition 2; issue 15 item 2).

An administrator gives a role, per event type and attribute, exactly one operator:

- xi (``read``): the attribute's values may be read;
- Phi (``conditional``): read, but only on events that meet a conjunctive condition
  over the same event's attributes (the role receives no other event of the type:
  :mod:`streamshield.cep.protection`);
- psi (``deny``): a prohibition; nothing about the attribute may be read;
- Omega (``statistics``): only aggregates with the allowed functions.

A role acts with its own rules and its juniors' (Fig. 1: a senior inherits its
juniors' rights; :meth:`RoleHierarchy.effective`). Which rules apply on one attribute
(:meth:`AccessObject.applicable`): among the effective roles that have a rule on it,
those of the most senior ones, i.e. of every such role no other such role is senior
to. A role's own rule is the administrator's most specific statement about it, so it
shadows whatever it would inherit (the paper assigns each role one operator per
attribute and introduces inheritance only to spare the administrator from writing
every rule); a role without one inherits. When several rules apply (incomparable
juniors, or several activated roles), :func:`combine` decides, and it never releases
a capability (the raw value on a given event, or one aggregate function) that none of
the applicable rules releases on that event:

1. a psi among them wins (deny overrides between rules of incomparable roles);
2. else a xi wins (every other operator releases less than xi);
3. else Phi conditions combine by OR: each condition is checked on the event itself,
   so every event that passes is one that one of the roles would receive;
4. else Omega functions combine by union (each aggregate is one some role may compute);
5. Phi with Omega (neither below the other) gives psi: raw values on some events next
   to aggregates over all of them would reveal aggregates of the remaining events,
   which no applicable rule releases. A rule of the role itself settles it.

An attribute no effective role has a rule on is denied (deny by default), but unlike
psi the absence of a rule does not override a grant from another role. Pure: no pyspark.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from streamshield.policy.roles import RoleHierarchy


class Operator(StrEnum):
    READ = "xi"
    CONDITIONAL = "phi"
    DENY = "psi"
    STATISTICS = "omega"


class Function(StrEnum):
    COUNT = "count"
    SUM = "sum"
    AVG = "avg"
    MIN = "min"
    MAX = "max"


COMPARATORS: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


@dataclass(frozen=True)
class Comparison:
    """``attribute op value`` on the event being released (Fig. 3 (d), (e))."""

    attribute: str
    op: str
    value: int | float | str | bool

    def holds(self, event: Mapping[str, Any]) -> bool:
        actual = event.get(self.attribute)
        if actual is None:
            return False  # unknown is not true: deny by default
        return COMPARATORS[self.op](actual, self.value)


Conjunction = tuple[Comparison, ...]


@dataclass(frozen=True)
class Rule:
    """One operator on one attribute. ``conditions`` (Phi): the attribute is readable on an
    event meeting any of these conjunctions (one from the rule as written; several only
    after :func:`combine`). ``functions`` (Omega): the aggregates allowed."""

    operator: Operator
    conditions: tuple[Conjunction, ...] = ()
    functions: frozenset[Function] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        if (self.operator is Operator.CONDITIONAL) != bool(self.conditions):
            raise ValueError("a Phi rule, and only a Phi rule, has conditions")
        if (self.operator is Operator.STATISTICS) != bool(self.functions):
            raise ValueError("an Omega rule, and only an Omega rule, has functions")

    def readable_on(self, event: Mapping[str, Any]) -> bool:
        """Whether the raw value of the attribute may be read on this event."""
        if self.operator is Operator.READ:
            return True
        if self.operator is Operator.CONDITIONAL:
            return any(all(c.holds(event) for c in conj) for conj in self.conditions)
        return False

    def capabilities(self, event: Mapping[str, Any]) -> frozenset[str]:
        """What this rule releases about the attribute on ``event``: ``raw`` and/or
        ``agg:<function>`` (a raw value allows every aggregate of the values released)."""
        if self.readable_on(event):
            return frozenset({"raw", *(f"agg:{f}" for f in Function)})
        return frozenset(f"agg:{f}" for f in self.functions)


DENIED = Rule(Operator.DENY)
READ = Rule(Operator.READ)


def combine(rules: Iterable[Rule]) -> Rule:
    """The one rule a role acts with, from the rules of its effective roles (see the
    module docstring for the order and why). No rule at all: denied."""
    rules = list(rules)
    kinds = {r.operator for r in rules}
    if not rules or Operator.DENY in kinds:
        return DENIED
    if Operator.READ in kinds:
        return READ
    if kinds == {Operator.CONDITIONAL}:
        conditions = tuple(dict.fromkeys(c for r in rules for c in r.conditions))
        return Rule(Operator.CONDITIONAL, conditions=conditions)
    if kinds == {Operator.STATISTICS}:
        return Rule(Operator.STATISTICS, functions=frozenset().union(*(r.functions for r in rules)))
    return DENIED  # Phi next to Omega


Key = tuple[str, str, str]  # (role, event type, attribute)


@dataclass(frozen=True)
class AccessObject:
    """Definition 2 as data: the event types (attribute -> kind) and exactly one rule per
    (role, event type, attribute) that has one."""

    event_types: Mapping[str, Mapping[str, str]]
    rules: Mapping[Key, Rule]

    def roles(self) -> frozenset[str]:
        return frozenset(role for role, _, _ in self.rules)

    def applicable(
        self, hierarchy: RoleHierarchy, activated: Iterable[str], type_: str, attribute: str
    ) -> list[Rule]:
        """The rules that apply to the activated roles on one attribute: those of the
        effective roles with a rule on it that no other such role is senior to (a rule
        shadows the rules of its role's juniors), in role order."""
        holders = [
            role
            for role in sorted(hierarchy.effective(activated))
            if (role, type_, attribute) in self.rules
        ]
        shadowed = {
            junior for role in holders for junior in hierarchy.effective([role]) if junior != role
        }
        return [self.rules[(role, type_, attribute)] for role in holders if role not in shadowed]

    def effective_rule(
        self, hierarchy: RoleHierarchy, activated: Iterable[str], type_: str, attribute: str
    ) -> Rule:
        """The rule the activated roles (with every junior) act with on one attribute."""
        return combine(self.applicable(hierarchy, activated, type_, attribute))

    def effective(
        self, hierarchy: RoleHierarchy, activated: Iterable[str]
    ) -> dict[str, dict[str, Rule]]:
        """Every event type's attributes with the rule the activated roles act with."""
        activated = frozenset(activated)
        return {
            type_: {a: self.effective_rule(hierarchy, activated, type_, a) for a in attrs}
            for type_, attrs in self.event_types.items()
        }
