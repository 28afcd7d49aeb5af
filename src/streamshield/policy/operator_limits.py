"""Operator-based access control and resource limits per role (Borealis §4.3, §5.4).

Rights on streams say *what* a user may read; they do not stop a user from registering
a query that keeps a year of tuples in a window or joins two busy streams and so takes
memory and CPU from every other tenant (the denial-of-service threat Borealis leaves
open). So an administrator restricts, per role, which expensive operators a query may
use and how big its windows and its owner's total state may be; the check runs once, at
query registration, never per tuple.

Choices:

- a user gets, limit by limit, the most permissive value among the rules of their
  effective roles that have a rule (a role grants capacity, as it grants rights);
- when none of their effective roles has a rule, the configured default applies, and
  the built-in default is conservative: no joins or sorts, small windows, few queries;
- ``None`` means unlimited; a setting that cannot be read is an error, never unlimited;
- a ``window()`` call whose length cannot be read, and every ``session_window()`` (its
  windows grow while events keep coming), passes only an unlimited RANGE limit.

Pure Python: the shape comes from ``lang.continuous.plan_shape``, duck-typed here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, Protocol

__all__ = [
    "OPERATORS",
    "LimitExceeded",
    "LimitRule",
    "OperatorLimits",
]

OPERATORS = frozenset({"join", "sort"})
"""Operators that need a role's permission: joins hold state for two streams, sorts
(ORDER BY) for a whole result."""

_ROWS, _RANGE = "ROWS", "RANGE"


class _Window(Protocol):
    @property
    def kind(self) -> Any: ...
    @property
    def size(self) -> int: ...


class _Shape(Protocol):
    @property
    def windows(self) -> Sequence[tuple[str, str, _Window]]: ...
    @property
    def time_windows(self) -> Sequence[float | None]: ...
    @property
    def operators(self) -> frozenset[str]: ...
    @property
    def window_rows(self) -> int: ...


class LimitExceeded(ValueError):
    """A query a user's roles do not allow; ``rule`` names the limit, the message says it
    and the allowed value, never anything from the data or the query's literals."""

    def __init__(self, rule: str, message: str) -> None:
        self.rule, self.message = rule, message
        super().__init__(f"limit exceeded ({rule}): {message}")


def _limit(value: object, name: str) -> int | None:
    if value is None:
        return None
    if type(value) is not int or value < 0:
        raise ValueError(f"{name} must be a non-negative whole number or null")
    return value


@dataclass(frozen=True)
class LimitRule:
    """The limits one role grants. ``None`` = unlimited."""

    operators: frozenset[str] = frozenset()
    max_rows: int | None = 1_000
    """Largest ``[ROWS n]``."""
    max_range_seconds: int | None = 3_600
    """Largest ``[RANGE t]`` and ``window()`` length, in seconds."""
    max_queries: int | None = 5
    """Queries one user may have running at once, this one included."""
    max_state_rows: int | None = 10_000
    """Rows all of a user's ROWS windows together may declare."""

    def __post_init__(self) -> None:
        if isinstance(self.operators, str) or not isinstance(self.operators, Iterable):
            raise ValueError("operators must be a list of operator names")
        operators = frozenset(self.operators)
        unknown = operators - OPERATORS
        if unknown:
            raise ValueError(f"unknown operators {sorted(unknown)}; known: {sorted(OPERATORS)}")
        object.__setattr__(self, "operators", operators)
        for name in ("max_rows", "max_range_seconds", "max_queries", "max_state_rows"):
            _limit(getattr(self, name), name)

    def to_dict(self) -> dict[str, object]:
        return {
            "operators": sorted(self.operators),
            "max_rows": self.max_rows,
            "max_range_seconds": self.max_range_seconds,
            "max_queries": self.max_queries,
            "max_state_rows": self.max_state_rows,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, object], base: LimitRule | None = None) -> LimitRule:
        """A rule from its dict; keys left out take ``base``'s values (null = unlimited)."""
        if not isinstance(data, Mapping):
            raise ValueError("a limit rule is an object")
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown limit settings {sorted(map(str, unknown))}")
        values = dict(data)
        if "operators" in values:
            operators = values["operators"]
            if not isinstance(operators, list | tuple | set | frozenset) or not all(
                isinstance(op, str) for op in operators
            ):
                raise ValueError("operators must be a list of operator names")
            values["operators"] = frozenset(operators)
        return replace(base if base is not None else cls(), **values)  # type: ignore[arg-type]


def _most(values: Iterable[int | None]) -> int | None:
    """The most permissive of some limits: unlimited beats any number."""
    best: int | None = 0
    for value in values:
        if value is None:
            return None
        best = max(best, value)  # type: ignore[type-var]
    return best


@dataclass(frozen=True)
class OperatorLimits:
    """Per-role limit rules and the default for users none of whose roles has one."""

    default: LimitRule = field(default_factory=LimitRule)
    roles: Mapping[str, LimitRule] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for role, rule in self.roles.items():
            if not isinstance(role, str) or not role or not isinstance(rule, LimitRule):
                raise ValueError("roles map role names to limit rules")
        object.__setattr__(self, "roles", dict(self.roles))

    def effective(self, effective_roles: Iterable[str]) -> LimitRule:
        """The limits a user with these effective roles gets (see the module's choices)."""
        rules = [self.roles[r] for r in sorted(set(effective_roles)) if r in self.roles]
        if not rules:
            return self.default
        return LimitRule(
            operators=frozenset().union(*(r.operators for r in rules)),
            max_rows=_most(r.max_rows for r in rules),
            max_range_seconds=_most(r.max_range_seconds for r in rules),
            max_queries=_most(r.max_queries for r in rules),
            max_state_rows=_most(r.max_state_rows for r in rules),
        )

    def check(
        self,
        shape: _Shape,
        effective_roles: Iterable[str],
        running_queries_of_user: Sequence[_Shape],
    ) -> None:
        """Raise :class:`LimitExceeded` unless a user with ``effective_roles``, who already
        runs the queries of shapes ``running_queries_of_user``, may also run ``shape``.

        Rule codes: ``operator``, ``rows``, ``range``, ``queries``, ``state``.
        """
        rule = self.effective(effective_roles)
        for operator in sorted(shape.operators):
            if operator not in rule.operators:
                raise LimitExceeded("operator", f"your roles may not use {operator} in a query")
        for _item, _stream, window in shape.windows:
            kind = getattr(window.kind, "value", window.kind)
            if kind == _ROWS and rule.max_rows is not None and window.size > rule.max_rows:
                raise LimitExceeded(
                    "rows", f"a ROWS window may hold at most {rule.max_rows} rows for your roles"
                )
            if (
                kind == _RANGE
                and rule.max_range_seconds is not None
                and window.size > rule.max_range_seconds
            ):
                raise LimitExceeded("range", self._range_message(rule))
        if rule.max_range_seconds is not None:
            for length in shape.time_windows:
                if length is None:
                    raise LimitExceeded(
                        "range",
                        "window() calls need a literal length such as '10 minutes', and "
                        "session_window() is not allowed for your roles",
                    )
                if length > rule.max_range_seconds:
                    raise LimitExceeded("range", self._range_message(rule))
        running = list(running_queries_of_user)
        if rule.max_queries is not None and len(running) + 1 > rule.max_queries:
            raise LimitExceeded(
                "queries", f"your roles may run at most {rule.max_queries} queries at once"
            )
        state = shape.window_rows + sum(q.window_rows for q in running)
        if rule.max_state_rows is not None and state > rule.max_state_rows:
            raise LimitExceeded(
                "state",
                f"your queries' ROWS windows may hold at most {rule.max_state_rows} rows "
                "together for your roles",
            )

    def check_span(self, effective_roles: Iterable[str], seconds: float) -> None:
        """Raise :class:`LimitExceeded` (rule ``range``) unless a user with
        ``effective_roles`` may keep state over ``seconds``: an event pattern's WITHIN,
        capped like a SQL query's ``[RANGE t]`` and ``window()`` lengths, since it
        bounds the pattern's join state the same way."""
        rule = self.effective(effective_roles)
        if rule.max_range_seconds is not None and seconds > rule.max_range_seconds:
            raise LimitExceeded("range", self._range_message(rule))

    @staticmethod
    def _range_message(rule: LimitRule) -> str:
        return f"a time window may span at most {rule.max_range_seconds} seconds for your roles"

    def to_dict(self) -> dict[str, object]:
        """A plain, JSON-ready dict (the server stores it as a system setting)."""
        return {
            "default": self.default.to_dict(),
            "roles": {role: rule.to_dict() for role, rule in sorted(self.roles.items())},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> OperatorLimits:
        """Read a stored setting; role rules take unspecified limits from the default.

        Anything malformed raises ``ValueError``: a broken setting must not silently
        become "no limits".
        """
        if not isinstance(data, Mapping):
            raise ValueError("operator limits are an object")
        unknown = set(data) - {"default", "roles"}
        if unknown:
            raise ValueError(f"unknown operator-limit settings {sorted(map(str, unknown))}")
        default = LimitRule.from_dict(data.get("default", {}))  # type: ignore[arg-type]
        roles = data.get("roles", {})
        if not isinstance(roles, Mapping) or not all(isinstance(r, str) for r in roles):
            raise ValueError("roles map role names to limit rules")
        rules = {role: LimitRule.from_dict(rule, default) for role, rule in roles.items()}
        return cls(default, rules)
