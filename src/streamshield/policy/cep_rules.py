"""Per-role event attribute operators (paper 4, Definition 2).

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
juniors, or several activated roles), :func:`combine` bounds the attribute, and it
never releases a capability (the raw value on a given event, or one aggregate
function) that none of the applicable rules releases on that event:

1. a psi among them wins (deny overrides between rules of incomparable roles);
2. else a xi wins (every other operator releases less than xi);
3. else Phi conditions combine by OR: each condition is checked on the event itself,
   so every event that passes is one that one of the roles would receive;
4. else Omega functions combine by union (each aggregate is one some role may compute);
5. Phi with Omega (neither below the other) gives psi: raw values on some events next
   to aggregates over all of them would reveal aggregates of the remaining events,
   which no applicable rule releases. A rule of the role itself settles it.

What a role receives is decided per event, not per attribute (:meth:`AccessObject.trees`):
a Phi filters whole events (Fig. 3 (d)), so two juniors with crossing Phi (one on
``a``, one on ``b``) each receive only their own events, and a senior acting with the
attribute bound alone (xi on both) would receive the events neither receives. So the
role's view is the union of the *own trees* of the effective roles: each effective
role's own rules on the type form one tree, which passes an event only if the event
meets every Phi condition of that role (all of them, shadowed or not: a filter only
narrows), and which releases exactly the attributes on which that role's rule applies
(its rule is among :meth:`applicable`, and the bound above keeps it: a psi or a Phi
beside an Omega removes the attribute, a xi beside an Omega keeps only the raw
releases). An event reaches the role if one of its trees passes it; an attribute's
value on it is released if one tree that passes it releases the attribute, and is
NULL otherwise. The role's own tree is one of them, so its own rules shadow the
inherited ones per attribute and filter only what it releases itself; the juniors'
events keep reaching it under their own trees. Everything a role receives on an event
is thus received on that event by a role whose rule on the attribute applies (itself
or a junior). An Omega attribute has one function set, the intersection over the
trees that release it (one column carries it; an aggregate must not include an event
whose tree does not allow that function: deny when unsure), denied when empty.

An attribute no effective role has a rule on is denied (deny by default), but unlike
psi the absence of a rule does not override a grant from another role. Pure: no pyspark.
"""

from __future__ import annotations

import itertools
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
Condition = tuple[Conjunction, ...]
"""A disjunction of conjunctions: ``()`` holds on no event, ``((),)`` on every one."""
TRUE: Condition = ((),)


def holds(condition: Condition, event: Mapping[str, Any]) -> bool:
    """Whether the event meets one of the conjunctions (NULL: not true)."""
    return any(all(c.holds(event) for c in conjunction) for conjunction in condition)


def implies(premise: Condition, conclusion: Condition) -> bool:
    """Whether every event meeting ``premise`` meets ``conclusion``, as written: each
    conjunction of the premise holds every comparison of one of the conclusion's
    (a sufficient test, so deny when unsure)."""
    return all(any(set(c) <= set(p) for c in conclusion) for p in premise)


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
            return holds(self.conditions, event)
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
class Tree:
    """One effective role's own detecting tree on one event type, as a part of a role's
    view: the events meeting ``condition`` (the role's Phi conditions, ANDed) pass, with
    ``released``: each attribute the role's applicable rule releases, under READ (raw:
    xi, or Phi, which the condition has then checked) or STATISTICS (the functions)."""

    role: str
    condition: Conjunction
    released: Mapping[str, Rule]

    def passes(self, event: Mapping[str, Any]) -> bool:
        return all(c.holds(event) for c in self.condition)


def own_trees(role: str, rules: Mapping[str, Rule]) -> tuple[Tree, ...]:
    """The tree(s) of one role's rules on one type, every rule applying (Fig. 3 as drawn):
    a Phi of several conjunctions (only after :func:`combine`) gives one tree each."""
    released = {
        name: READ if rule.operator in (Operator.READ, Operator.CONDITIONAL) else rule
        for name, rule in rules.items()
        if rule.operator is not Operator.DENY
    }
    phis = [r.conditions for r in rules.values() if r.operator is Operator.CONDITIONAL]
    return tuple(
        Tree(role, tuple(dict.fromkeys(c for conj in chosen for c in conj)), released)
        for chosen in itertools.product(*phis)
    )


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
        roles = self.applicable_roles(hierarchy, activated, type_, attribute)
        return [self.rules[(role, type_, attribute)] for role in roles]

    def applicable_roles(
        self, hierarchy: RoleHierarchy, activated: Iterable[str], type_: str, attribute: str
    ) -> list[str]:
        """The roles whose rule on the attribute applies (see :meth:`applicable`)."""
        holders = [
            role
            for role in sorted(hierarchy.effective(activated))
            if (role, type_, attribute) in self.rules
        ]
        shadowed = {
            junior for role in holders for junior in hierarchy.effective([role]) if junior != role
        }
        return [role for role in holders if role not in shadowed]

    def effective_rule(
        self, hierarchy: RoleHierarchy, activated: Iterable[str], type_: str, attribute: str
    ) -> Rule:
        """The activated roles' bound on one attribute (with every junior): no tree of
        their view releases more of it (:meth:`trees` decides per event)."""
        return combine(self.applicable(hierarchy, activated, type_, attribute))

    def effective(
        self, hierarchy: RoleHierarchy, activated: Iterable[str]
    ) -> dict[str, dict[str, Rule]]:
        """Every event type's attributes with the activated roles' bound on them."""
        activated = frozenset(activated)
        return {
            type_: {a: self.effective_rule(hierarchy, activated, type_, a) for a in attrs}
            for type_, attrs in self.event_types.items()
        }

    def trees(
        self, hierarchy: RoleHierarchy, activated: Iterable[str], type_: str
    ) -> tuple[Tree, ...]:
        """The activated roles' view of one event type: the own trees of their effective
        roles that release anything (module docstring: an event passes if one tree
        passes it; a value is released where a tree that passes releases it)."""
        activated = frozenset(activated)
        modes: dict[str, Rule] = {}
        appliers: dict[str, list[str]] = {}
        for name in self.event_types.get(type_, {}):
            roles = self.applicable_roles(hierarchy, activated, type_, name)
            bound = combine(self.rules[(r, type_, name)] for r in roles)
            if bound.operator is Operator.STATISTICS:
                functions = frozenset.intersection(
                    *(self.rules[(r, type_, name)].functions for r in roles)
                )
                bound = Rule(Operator.STATISTICS, functions=functions) if functions else DENIED
            if bound.operator is not Operator.DENY:
                modes[name] = READ if bound.operator is not Operator.STATISTICS else bound
                appliers[name] = roles
        result: list[Tree] = []
        for role in sorted(hierarchy.effective(activated)):
            rules = {
                name: rule for (r, t, name), rule in self.rules.items() if r == role and t == type_
            }
            for tree in own_trees(role, rules):
                released = {
                    name: modes[name]
                    for name, rule in tree.released.items()
                    if role in appliers.get(name, ()) and rule.operator == modes[name].operator
                }
                if released:
                    result.append(Tree(role, tree.condition, released))
        return tuple(result)
