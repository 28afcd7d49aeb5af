"""The JSON text form of the per-role attribute operators (import, export, validation).

JSON rather than YAML because the project has no YAML library (and JSON is what the
HTTP API speaks); the shape is the same either way::

    {"event_types": {"Temperature": {"ts": "timestamp", "room": "string", "celsius": "double"}},
     "roles": {"nurse": {"Temperature": [
         {"operator": "xi", "attributes": ["room", "ts"]},
         {"operator": "phi", "attributes": ["celsius"],
          "condition": [["room", "=", "L1"], ["celsius", ">", 30]]}]}}}

``operator`` is one of xi, phi, psi, omega (or read, conditional, deny, statistics);
``attributes`` a list or ``"*"`` (every attribute of the type); a Phi rule has a
``condition`` (a non-empty conjunction of ``[attribute, op, value]``), an Omega rule its
``functions``. Every error names the place (``roles.nurse.Temperature[1].condition[0]``)
and the problem, never a value from the file: a condition's constants are data.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from streamshield.policy.cep_rules import (
    COMPARATORS,
    AccessObject,
    Comparison,
    Function,
    Operator,
    Rule,
)
from streamshield.policy.roles import RoleHierarchy

KINDS = frozenset({"long", "double", "string", "boolean", "timestamp"})
ALIASES = {
    "read": Operator.READ,
    "conditional": Operator.CONDITIONAL,
    "deny": Operator.DENY,
    "statistics": Operator.STATISTICS,
}
RULE_KEYS = {
    Operator.READ: {"operator", "attributes"},
    Operator.DENY: {"operator", "attributes"},
    Operator.CONDITIONAL: {"operator", "attributes", "condition"},
    Operator.STATISTICS: {"operator", "attributes", "functions"},
}


class RulesError(ValueError):
    """A rule file that cannot be accepted: where (a path into the document) and why."""

    def __init__(self, where: str, problem: str):
        self.where, self.problem = where, problem
        super().__init__(f"{where}: {problem}" if where else problem)


def loads(text: str, hierarchy: RoleHierarchy | None = None) -> AccessObject:
    """The access object of a JSON document; RulesError for anything off. With a
    ``hierarchy``, every role must be one of its roles."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as err:
        raise RulesError(f"line {err.lineno}, column {err.colno}", "not valid JSON") from None
    return from_document(document, hierarchy)


def from_document(document: Any, hierarchy: RoleHierarchy | None = None) -> AccessObject:
    _expect(document, dict, "", "an object")
    _keys(document, {"event_types", "roles"}, "", required={"event_types", "roles"})
    event_types = _event_types(document["event_types"])
    roles = document["roles"]
    _expect(roles, dict, "roles", "an object of roles")
    rules: dict[tuple[str, str, str], Rule] = {}
    for role, types in roles.items():
        where = f"roles.{role}"
        if hierarchy is not None and role not in hierarchy.juniors:
            raise RulesError(where, "unknown role")
        _expect(types, dict, where, "an object of event types")
        for type_, entries in types.items():
            here = f"{where}.{type_}"
            if type_ not in event_types:
                raise RulesError(here, "unknown event type")
            _expect(entries, list, here, "a list of rules")
            for index, entry in enumerate(entries):
                at = f"{here}[{index}]"
                rule, attributes = _rule(entry, event_types[type_], at)
                for attribute in attributes:
                    if (role, type_, attribute) in rules:
                        raise RulesError(
                            at,
                            f"attribute {attribute} already has an operator for this role "
                            "(one operator per attribute)",
                        )
                    rules[(role, type_, attribute)] = rule
    return AccessObject(event_types, rules)


def _event_types(value: Any) -> dict[str, dict[str, str]]:
    _expect(value, dict, "event_types", "an object of event types")
    result: dict[str, dict[str, str]] = {}
    for type_, attrs in value.items():
        where = f"event_types.{type_}"
        _expect(attrs, dict, where, "an object of attribute kinds")
        if not attrs:
            raise RulesError(where, "an event type has at least one attribute")
        for name, kind in attrs.items():
            if not isinstance(kind, str) or kind not in KINDS:
                raise RulesError(
                    f"{where}.{name}", f"unknown kind; one of {', '.join(sorted(KINDS))}"
                )
        result[type_] = dict(attrs)
    return result


def _rule(entry: Any, kinds: Mapping[str, str], at: str) -> tuple[Rule, list[str]]:
    _expect(entry, dict, at, "an object with an operator")
    if "operator" not in entry:
        raise RulesError(at, "missing operator")
    name = entry["operator"]
    if not isinstance(name, str) or (
        name.lower() not in ALIASES and name.lower() not in set(Operator)
    ):
        raise RulesError(f"{at}.operator", "unknown operator; one of xi, phi, psi, omega")
    op = ALIASES.get(name.lower()) or Operator(name.lower())
    _keys(entry, RULE_KEYS[op], at, required=RULE_KEYS[op])
    attributes = _attributes(entry["attributes"], kinds, f"{at}.attributes")
    if op is Operator.CONDITIONAL:
        conjunction = _condition(entry["condition"], kinds, f"{at}.condition")
        return Rule(op, conditions=(conjunction,)), attributes
    if op is Operator.STATISTICS:
        return Rule(op, functions=_functions(entry["functions"], f"{at}.functions")), attributes
    return Rule(op), attributes


def _attributes(value: Any, kinds: Mapping[str, str], at: str) -> list[str]:
    if value == "*":
        return list(kinds)
    _expect(value, list, at, 'a list of attributes or "*"')
    if not value:
        raise RulesError(at, "names no attribute")
    for index, name in enumerate(value):
        if not isinstance(name, str) or name not in kinds:
            raise RulesError(f"{at}[{index}]", "unknown attribute of this event type")
    if len(set(value)) != len(value):
        raise RulesError(at, "an attribute is listed twice")
    return list(value)


def _condition(value: Any, kinds: Mapping[str, str], at: str) -> tuple[Comparison, ...]:
    _expect(value, list, at, "a list of [attribute, op, value]")
    if not value:
        raise RulesError(at, "an empty condition (use xi to read every event)")
    result = []
    for index, part in enumerate(value):
        here = f"{at}[{index}]"
        if not isinstance(part, list) or len(part) != 3:
            raise RulesError(here, "expected [attribute, op, value]")
        attribute, op, constant = part
        if not isinstance(attribute, str) or attribute not in kinds:
            raise RulesError(f"{here}[0]", "unknown attribute of this event type")
        if not isinstance(op, str) or op not in COMPARATORS:
            raise RulesError(f"{here}[1]", f"unknown comparison; one of {' '.join(COMPARATORS)}")
        if not _fits(kinds[attribute], constant):
            raise RulesError(
                f"{here}[2]", f"the value does not fit attribute {attribute} ({kinds[attribute]})"
            )
        result.append(Comparison(attribute, op, constant))
    return tuple(result)


def _fits(kind: str, value: Any) -> bool:
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    if kind in ("long", "double"):
        return isinstance(value, int | float) and not isinstance(value, bool)
    return False  # timestamps: no conditions on event time


def _functions(value: Any, at: str) -> frozenset[Function]:
    _expect(value, list, at, "a list of functions")
    if not value:
        raise RulesError(at, "an Omega rule allows at least one function")
    allowed = {f.value for f in Function}
    for index, name in enumerate(value):
        if not isinstance(name, str) or name.lower() not in allowed:
            raise RulesError(f"{at}[{index}]", f"unknown function; one of {', '.join(allowed)}")
    return frozenset(Function(name.lower()) for name in value)


def _expect(value: Any, kind: type, at: str, what: str) -> None:
    if not isinstance(value, kind):
        raise RulesError(at, f"expected {what}")


def _keys(value: Mapping[str, Any], allowed: set[str], at: str, *, required: set[str]) -> None:
    for key in value:
        if key not in allowed:
            raise RulesError(f"{at}.{key}" if at else key, "unknown field")
    for key in sorted(required - set(value)):
        raise RulesError(at, f"missing {key}")


def to_document(access: AccessObject) -> dict[str, Any]:
    """The JSON-able document of an access object (one rule entry per distinct rule)."""
    roles: dict[str, dict[str, list[dict[str, Any]]]] = {}
    grouped: dict[tuple[str, str, Rule], list[str]] = {}
    for (role, type_, attribute), rule in sorted(access.rules.items(), key=lambda kv: kv[0]):
        grouped.setdefault((role, type_, rule), []).append(attribute)
    for (role, type_, rule), attributes in grouped.items():
        if len(rule.conditions) > 1:
            raise ValueError("a combined Phi rule (several conditions) has no text form")
        entry: dict[str, Any] = {"operator": rule.operator.value, "attributes": attributes}
        if rule.conditions:
            entry["condition"] = [[c.attribute, c.op, c.value] for c in rule.conditions[0]]
        if rule.functions:
            entry["functions"] = sorted(f.value for f in rule.functions)
        roles.setdefault(role, {}).setdefault(type_, []).append(entry)
    return {"event_types": {t: dict(a) for t, a in access.event_types.items()}, "roles": roles}


def dumps(access: AccessObject) -> str:
    return json.dumps(to_document(access), indent=2, sort_keys=True)
