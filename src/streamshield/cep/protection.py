"""The privacy security protection engine (PSPE) of one role, pure (paper 4,
section IV).

A role's operation space receives a *copy* of the event bus: per event type, the
event attribute detecting trees of Fig. 3 decide what of each event passes. A
:class:`Detector` is the role's view of one type, built once per rule version: the own
trees of its effective roles (:meth:`AccessObject.trees
<streamshield.policy.cep_rules.AccessObject.trees>`), each one tree of Fig. 3:

- (a) every attribute xi: the event passes whole;
- (b) every attribute psi (or without a rule): the type does not pass at all;
- (c) some attributes psi: the event passes as a new event without them;
- (d), (e) Phi: "the node will only allow the event whose comparison result is true to
  pass through": a tree passes an event only if it meets the condition of *every* Phi
  attribute of the tree (single or multi-value comparisons, checked on the original
  event; a NULL compares as unknown, which is not true);
- (f) Omega: the value passes (the node "is equivalent to xi"); registration
  (:mod:`streamshield.cep.validation`) lets a pattern use it only inside an allowed
  aggregate, and groups of fewer than ``k`` matches are withheld (the project's k rule).

The view is the union of its trees, per event: an event reaches the role if one tree
passes it, and an attribute's value on it is the original value if one tree that
passes it releases the attribute, else NULL (a senior of two juniors with crossing Phi
receives the events one of them receives, each with what that junior receives; never
an event neither receives). A role with one tree (no juniors with rules) is Fig. 3
exactly: every event that passes carries every released attribute.

Why every Phi attribute of a tree and not only those a pattern reads: the trees are
the role's, built from its rules and shared by every pattern of its space (the paper's
PSPE keeps "the privacy security rules related to such user role", not the
patterns'), and a tree's combined node sits above all its attribute nodes. A filter
that depended on the pattern would let two patterns of one role, one reading the Phi
attribute and one not, differ by exactly the events outside the condition. So an
event that no tree passes is not in the role's space at all: it is not counted, not
matched, not shown with a NULL, and it does not kill a NOT (the absence a NOT checks is
of events the role may receive; a match that holds beside an event the role may not
see reveals nothing about that event). It does not move the role's watermark either:
the watermark moves with the events the space receives, so no emission time tells of
an event the role may not see. The event time ``ts`` always travels (to order and
window events); a pattern may read it only where every tree releases it raw (it is
never masked).

:func:`protect` is the reference copy over a list of events (the oracle's input); the
Spark engine compiles the same detectors to native projections and one filter
(:mod:`streamshield.cep.spark_protection`). Pure: no pyspark.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from streamshield.cep.oracle import Event
from streamshield.cep.pattern import TIME
from streamshield.policy.cep_rules import (
    DENIED,
    READ,
    AccessObject,
    Condition,
    Operator,
    Rule,
    Tree,
    own_trees,
)
from streamshield.policy.roles import RoleHierarchy

K_DEFAULT = 3  # the project's k rule (QueryService.statistics_k): smallest released group


@dataclass(frozen=True)
class Detector:
    """The role's view of one event type: its trees, and each attribute (the event time
    aside) that some tree releases with the rule it passes under (the role's bound on it,
    :func:`~streamshield.policy.cep_rules.combine`; an Omega with the trees' functions)."""

    type: str
    released: Mapping[str, Rule]
    trees: tuple[Tree, ...]

    @classmethod
    def of(cls, type_: str, rules: Mapping[str, Rule]) -> Detector:
        """The view of one role without juniors holding rules: Fig. 3's one tree."""
        released = {n: r for n, r in rules.items() if n != TIME and r.operator is not Operator.DENY}
        return cls(type_, released, own_trees("", rules) if released else ())

    @property
    def condition(self) -> Condition:
        """When an event reaches the role's space: one of the trees passes it."""
        return tuple(dict.fromkeys(tree.condition for tree in self.trees))

    def visible(self, name: str) -> Condition:
        """When an attribute's value is released on an event that passes."""
        return tuple(dict.fromkeys(t.condition for t in self.trees if name in t.released))

    def everywhere(self, name: str) -> bool:
        """Whether the attribute's value is released on every event that passes."""
        return all(name in tree.released for tree in self.trees)

    def rule(self, name: str) -> Rule:
        """What a pattern may do with the attribute; the event time, never masked, is
        readable only if every tree releases it raw."""
        if name == TIME:
            raw = all(t.released.get(TIME) == READ for t in self.trees)
            return READ if raw else DENIED
        return self.released.get(name, DENIED)

    def passes(self, values: Mapping) -> bool:
        """Whether an event with these values reaches the role's operation space."""
        return any(tree.passes(values) for tree in self.trees)

    def copy(self, event: Event) -> Event | None:
        """What of ``event`` reaches the role's operation space (None: nothing)."""
        passing = [tree for tree in self.trees if tree.passes(event.values)]
        if not passing:
            return None
        values = {TIME: event.values.get(TIME)}
        for name in self.released:
            shown = any(name in tree.released for tree in passing)
            values[name] = event.values.get(name) if shown else None
        return Event(event.type, values, event.serial)


def detectors(
    access: AccessObject, hierarchy: RoleHierarchy, activated: Iterable[str]
) -> dict[str, Detector]:
    """The role's views, keyed by event type (the paper's hash index); a type none of
    whose trees releases an attribute besides the event time has none (Fig. 3 (b))."""
    activated = frozenset(activated)
    result = {}
    for type_, rules in access.effective(hierarchy, activated).items():
        trees = tuple(
            tree
            for tree in access.trees(hierarchy, activated, type_)
            if set(tree.released) - {TIME}
        )
        modes = {name: mode for tree in trees for name, mode in tree.released.items()}
        released = {
            name: rules[name] if modes[name] == READ else modes[name]
            for name in rules
            if name in modes and name != TIME
        }
        if trees:
            result[type_] = Detector(type_, released, trees)
    return result


def protect(trees: Mapping[str, Detector], events: Iterable[Event]) -> list[Event]:
    """The copy of the event bus the role's operation space receives."""
    copies = []
    for event in events:
        tree = trees.get(event.type)
        if tree is not None and (copy := tree.copy(event)) is not None:
            copies.append(copy)
    return copies
