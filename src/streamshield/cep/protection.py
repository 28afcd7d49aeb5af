"""The privacy security protection engine (PSPE) of one role, pure (paper 4, section IV;
issue 15 item 3).

A role's operation space receives a *copy* of the event bus: per event type, the
event attribute detecting tree of Fig. 3 decides what of each event passes. Here a tree
is a :class:`Detector`, built once per rule version from the role's effective rules:

- (a) every attribute xi: the event passes whole;
- (b) every attribute psi (or without a rule): the type does not pass at all;
- (c) some attributes psi: the event passes as a new event without them;
- (d), (e) Phi: "the node will only allow the event whose comparison result is true to
  pass through": an event passes only if it meets the condition of *every* Phi
  attribute of its type in the role's tree (single or multi-value comparisons, checked
  on the original event; a NULL compares as unknown, which is not true), and then it
  passes with every released attribute;
- (f) Omega: the value passes (the node "is equivalent to xi"); registration
  (:mod:`streamshield.cep.validation`) lets a pattern use it only inside an allowed
  aggregate, and groups of fewer than ``k`` matches are withheld (the project's k rule).

Why every Phi attribute of the type and not only those a pattern reads: the tree is the
role's, one per event type, built from the role's rules and shared by every pattern of
its space (the paper's PSPE keeps "the privacy security rules related to such user
role", not the patterns'), and its combined node sits above all attribute nodes. A
filter that depended on the pattern would let two patterns of one role, one reading the
Phi attribute and one not, differ by exactly the events outside the condition. So an
event outside a condition is not in the role's space at all: it is not counted, not
matched, not shown with a NULL, and it does not kill a NOT (the absence a NOT checks is
of events the role may receive; a match that holds beside an event the role may not
see reveals nothing about that event). It does not move the role's watermark either:
the watermark moves with the events the space receives, so no emission time tells of
an event the role may not see. The event time ``ts`` always travels (to order and
window events; reading it is a read like any other).

:func:`protect` is the reference copy over a list of events (the oracle's input); the
Spark engine compiles the same detectors to native projections and one filter
(:mod:`streamshield.cep.spark_protection`). Pure: no pyspark.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from streamshield.cep.oracle import Event
from streamshield.cep.pattern import TIME
from streamshield.policy.cep_rules import READ, AccessObject, Operator, Rule
from streamshield.policy.roles import RoleHierarchy

K_DEFAULT = 3  # the project's k rule (QueryService.statistics_k): smallest released group


@dataclass(frozen=True)
class Detector:
    """The detecting tree of one event type for one role: the attributes that pass, each
    with the rule it passes under (xi, Phi or Omega; psi attributes are absent)."""

    type: str
    released: Mapping[str, Rule]
    on_time: Rule = READ
    """The rule on the event time, which travels whatever it is; a Phi there filters too."""

    @property
    def conditions(self) -> tuple[Rule, ...]:
        """The Phi rules of the type: an event passes only if it meets every one."""
        rules = (*self.released.values(), self.on_time)
        return tuple(r for r in rules if r.operator is Operator.CONDITIONAL)

    def passes(self, values: Mapping) -> bool:
        """Whether an event with these values reaches the role's operation space."""
        return all(rule.readable_on(values) for rule in self.conditions)

    def copy(self, event: Event) -> Event | None:
        """What of ``event`` reaches the role's operation space (None: nothing)."""
        if not self.passes(event.values):
            return None
        values = {TIME: event.values.get(TIME)}
        values.update((name, event.values.get(name)) for name in self.released)
        return Event(event.type, values, event.serial)


def detectors(
    access: AccessObject, hierarchy: RoleHierarchy, activated: Iterable[str]
) -> dict[str, Detector]:
    """The role's detecting trees, keyed by event type (the paper's hash index); a type
    whose every attribute is denied has none (Fig. 3 (b))."""
    result = {}
    for type_, rules in access.effective(hierarchy, activated).items():
        released = {
            name: rule
            for name, rule in rules.items()
            if name != TIME and rule.operator is not Operator.DENY
        }
        if released:
            result[type_] = Detector(type_, released, rules.get(TIME, READ))
    return result


def protect(trees: Mapping[str, Detector], events: Iterable[Event]) -> list[Event]:
    """The copy of the event bus the role's operation space receives."""
    copies = []
    for event in events:
        tree = trees.get(event.type)
        if tree is not None and (copy := tree.copy(event)) is not None:
            copies.append(copy)
    return copies
