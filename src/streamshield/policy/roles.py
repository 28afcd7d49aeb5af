"""Role hierarchy and the effective roles of a query (paper 1, Fig. 2; DESIGN.md section 3).

A query runs with the roles its owner activated plus every junior of those roles, so
a grant to a junior reaches its seniors. Labels store *reader sets* closed upwards
(a grant to r is readable by r and every senior of r); a query then passes when its
effective roles meet the reader set. Both views are kept here so that the two can be
checked against each other. Unknown roles are errors: they must never be silently
treated as "no role" on one side and "some role" on the other.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property


class UnknownRoleError(KeyError):
    """A role name that the hierarchy does not define."""

    def __str__(self) -> str:
        return f"unknown role: {self.args[0]!r}"


class RoleCycleError(ValueError):
    """The junior relation must be acyclic; a cycle would make every role senior to itself."""


@dataclass(frozen=True)
class RoleHierarchy:
    """Roles and their direct juniors (``juniors["C"] == {"D"}``: a cardiologist is a doctor)."""

    juniors: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @classmethod
    def build(
        cls, roles: Iterable[str], junior_of: Iterable[tuple[str, str]] = ()
    ) -> RoleHierarchy:
        """From role names and (senior, junior) edges."""
        direct: dict[str, set[str]] = {role: set() for role in roles}
        for senior, junior in junior_of:
            for role in (senior, junior):
                if role not in direct:
                    raise UnknownRoleError(role)
            direct[senior].add(junior)
        hierarchy = cls({role: frozenset(js) for role, js in direct.items()})
        hierarchy._check_acyclic()
        return hierarchy

    @property
    def roles(self) -> tuple[str, ...]:
        """All roles in a stable order (the bit order of role bitsets)."""
        return tuple(sorted(self.juniors))

    def check(self, roles: Iterable[str]) -> frozenset[str]:
        """The roles as a set, or UnknownRoleError for the first role not defined."""
        result = frozenset(roles)
        for role in sorted(result):
            if role not in self.juniors:
                raise UnknownRoleError(role)
        return result

    @cached_property
    def _below(self) -> dict[str, frozenset[str]]:
        """Each role with all its juniors, transitively, itself included."""
        below: dict[str, frozenset[str]] = {}

        def visit(role: str) -> frozenset[str]:
            if role not in below:
                below[role] = frozenset({role}).union(*(visit(j) for j in self.juniors[role]))
            return below[role]

        for role in self.juniors:
            visit(role)
        return below

    @cached_property
    def _above(self) -> dict[str, frozenset[str]]:
        above: dict[str, set[str]] = {role: set() for role in self.juniors}
        for role, below in self._below.items():
            for junior in below:
                above[junior].add(role)
        return {role: frozenset(seniors) for role, seniors in above.items()}

    def effective(self, activated: Iterable[str]) -> frozenset[str]:
        """Activated roles plus all their juniors: the roles a query acts with."""
        return frozenset().union(*(self._below[r] for r in self.check(activated)))

    def readers(self, granted: Iterable[str]) -> frozenset[str]:
        """Granted roles plus all their seniors: the roles a grant reaches."""
        return frozenset().union(*(self._above[r] for r in self.check(granted)))

    def _check_acyclic(self) -> None:
        state: dict[str, int] = {}  # 1 = on the current path, 2 = done

        def visit(role: str, path: list[str]) -> None:
            if state.get(role) == 2:
                return
            if state.get(role) == 1:
                raise RoleCycleError(" -> ".join([*path, role]))
            state[role] = 1
            for junior in sorted(self.juniors[role]):
                visit(junior, [*path, role])
            state[role] = 2

        for role in self.roles:
            visit(role, [])
