"""Role hierarchy and the effective roles of a query (paper 1, Fig. 2; DESIGN.md section 3).

A query runs with the roles its owner activated plus every junior of those roles, so
a grant to a junior reaches its seniors. Labels store *reader sets* closed upwards
(a grant to r is readable by r and every senior of r); a query then passes when its
effective roles meet the reader set. Both views are kept here so that the two can be
checked against each other. Unknown roles are errors: they must never be silently
treated as "no role" on one side and "some role" on the other.

Bit layout. A role's bit position in every stored label is its index in
:attr:`RoleHierarchy.roles`, and a label block is :attr:`RoleHierarchy.block_words`
wide. Both are part of the data already stored, so a hierarchy that changes while data
exists must keep them: ``order`` fixes the positions (new roles are appended, roles are
never removed or reordered) and ``capacity`` fixes the width (a multiple of 64 chosen
when the root is created; a role beyond it is refused). Without them (tests, pure
examples) the order is sorted and the width is just enough, as before.
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


class RoleCapacityError(ValueError):
    """More roles than the label width fixed for this storage root can hold."""


WORD_BITS = 64


def capacity_for(n_roles: int) -> int:
    """The smallest capacity (a multiple of 64, at least 64) that holds ``n_roles``."""
    return max(1, -(-n_roles // WORD_BITS)) * WORD_BITS


@dataclass(frozen=True)
class RoleHierarchy:
    """Roles and their direct juniors (``juniors["C"] == {"D"}``: a cardiologist is a doctor)."""

    juniors: Mapping[str, frozenset[str]] = field(default_factory=dict)
    # The bit layout (see the module docstring); not part of equality: two hierarchies
    # with the same roles and edges grant the same, whatever their storage layout.
    order: tuple[str, ...] = field(default=(), compare=False)
    capacity: int = field(default=0, compare=False)

    @classmethod
    def build(
        cls,
        roles: Iterable[str],
        junior_of: Iterable[tuple[str, str]] = (),
        *,
        order: Iterable[str] | None = None,
        capacity: int = 0,
    ) -> RoleHierarchy:
        """From role names and (senior, junior) edges; ``order`` and ``capacity`` fix the
        bit layout (every role once; capacity 0: just enough)."""
        direct: dict[str, set[str]] = {role: set() for role in roles}
        for senior, junior in junior_of:
            for role in (senior, junior):
                if role not in direct:
                    raise UnknownRoleError(role)
            direct[senior].add(junior)
        positions = tuple(order) if order is not None else ()
        if positions and (len(set(positions)) != len(positions) or set(positions) != set(direct)):
            raise ValueError("the bit order must list every role exactly once")
        if capacity and (capacity % WORD_BITS or capacity < len(direct)):
            if capacity % WORD_BITS:
                raise ValueError(f"a role capacity is a multiple of {WORD_BITS}, got {capacity}")
            raise RoleCapacityError(
                f"{len(direct)} roles exceed this root's role capacity of {capacity}"
            )
        hierarchy = cls({role: frozenset(js) for role, js in direct.items()}, positions, capacity)
        hierarchy._check_acyclic()
        return hierarchy

    @property
    def roles(self) -> tuple[str, ...]:
        """All roles in a stable order (the bit order of role bitsets)."""
        return self.order if self.order else tuple(sorted(self.juniors))

    @property
    def block_words(self) -> int:
        """64-bit words of one label block: the capacity's, or just enough without one."""
        return max(1, -(-max(self.capacity, len(self.juniors)) // WORD_BITS))

    @property
    def edges(self) -> list[tuple[str, str]]:
        """(senior, junior) pairs, sorted."""
        return sorted((s, j) for s, js in self.juniors.items() for j in js)

    def keeps_layout_of(self, old: RoleHierarchy) -> bool:
        """True when labels encoded with ``old`` read the same with this hierarchy: every
        old role keeps its position (new roles only appended) and the width is the same."""
        return self.roles[: len(old.roles)] == old.roles and self.block_words == old.block_words

    def with_role(self, role: str, juniors: Iterable[str] = ()) -> RoleHierarchy:
        """A new role appended at the next bit position, with its direct juniors.

        RoleCapacityError past the capacity; UnknownRoleError for an unknown junior.
        """
        if role in self.juniors:
            raise ValueError(f"role {role!r} already exists")
        if self.capacity and len(self.juniors) + 1 > self.capacity:
            raise RoleCapacityError(
                f"this root's role capacity of {self.capacity} roles is reached"
            )
        return RoleHierarchy.build(
            [*self.roles, role],
            [*self.edges, *((role, j) for j in juniors)],
            order=[*self.roles, role],
            capacity=self.capacity,
        )

    def with_junior(self, senior: str, junior: str) -> RoleHierarchy:
        """The edge senior -> junior added; RoleCycleError if it closes a cycle."""
        self.check([senior, junior])
        if senior == junior:
            raise RoleCycleError(f"{senior} -> {junior}")
        edges = sorted({*self.edges, (senior, junior)})
        return RoleHierarchy.build(self.roles, edges, order=self.roles, capacity=self.capacity)

    def without_junior(self, senior: str, junior: str) -> RoleHierarchy:
        """The edge senior -> junior removed (it must exist)."""
        self.check([senior, junior])
        if junior not in self.juniors[senior]:
            raise KeyError(f"{junior!r} is not a direct junior of {senior!r}")
        edges = [e for e in self.edges if e != (senior, junior)]
        return RoleHierarchy.build(self.roles, edges, order=self.roles, capacity=self.capacity)

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
