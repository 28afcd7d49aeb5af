"""The privacy security protection engine (PSPE) of one role, pure (paper 4, section IV;
issue 15 item 3).

A role's operation space receives a *copy* of the event bus: per event type, the
event attribute detecting tree of Fig. 3 decides what of each event passes. Here a tree
is a :class:`Detector`, built once per rule version from the role's effective rules:

- (a) every attribute xi: the event passes whole;
- (b) every attribute psi (or without a rule): the type does not pass at all;
- (c) some attributes psi: the event passes as a new event without them;
- (d), (e) Phi: the attribute's value passes on an event meeting the condition (single
  or multi-value comparisons, checked on the original event), and is NULL on the others;
  an event on which no attribute is released at all does not pass (all-Phi types are
  therefore filtered, as the paper's node does);
- (f) Omega: the value passes (the node "is equivalent to xi"); registration
  (:mod:`streamshield.cep.validation`) lets a pattern use it only inside an allowed
  aggregate, and groups of fewer than ``k`` matches are withheld (the project's k rule).

Masking to NULL rather than dropping the event keeps the role's other attributes of the
same event usable, and the pattern language's three-valued logic makes a NULL compare
as unknown: no WHERE clause, NOT condition or join key can turn a masked value into a
match, so none can reveal a value outside the condition. The event time ``ts`` always
travels (to order and window events; reading it is a read like any other).

:func:`protect` is the reference copy over a list of events (the oracle's input); the
Spark engine compiles the same detectors to native projections
(:mod:`streamshield.cep.spark_protection`). Pure: no pyspark.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from streamshield.cep.oracle import Event
from streamshield.cep.pattern import TIME
from streamshield.policy.cep_rules import AccessObject, Operator, Rule
from streamshield.policy.roles import RoleHierarchy

K_DEFAULT = 3  # the project's k rule (QueryService.statistics_k): smallest released group


@dataclass(frozen=True)
class Detector:
    """The detecting tree of one event type for one role: the attributes that pass, each
    with the rule it passes under (xi, Phi or Omega; psi attributes are absent)."""

    type: str
    released: Mapping[str, Rule]

    @property
    def conditional(self) -> bool:
        """Whether some event of the type may not pass (every released attribute is Phi)."""
        return all(r.operator is Operator.CONDITIONAL for r in self.released.values())

    def copy(self, event: Event) -> Event | None:
        """What of ``event`` reaches the role's operation space (None: nothing)."""
        values: dict = {TIME: event.values.get(TIME)}
        passed = False
        for name, rule in self.released.items():
            visible = rule.operator is not Operator.CONDITIONAL or rule.readable_on(event.values)
            values[name] = event.values.get(name) if visible else None
            passed = passed or visible
        return Event(event.type, values, event.serial) if passed else None


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
            result[type_] = Detector(type_, released)
    return result


def protect(trees: Mapping[str, Detector], events: Iterable[Event]) -> list[Event]:
    """The copy of the event bus the role's operation space receives."""
    copies = []
    for event in events:
        tree = trees.get(event.type)
        if tree is not None and (copy := tree.copy(event)) is not None:
            copies.append(copy)
    return copies
