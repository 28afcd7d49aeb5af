"""Operator nodes of a registered query's plan (Chinese-Wall paper, Def. 5).

A node is an immutable value: its operator kind, its parameters (``parm``), its synopsis
(``syn``, the window of a blocking operator) and its inputs (stream names or child nodes).
Why values: Def. 6 calls two nodes equivalent when operator, parameters, synopsis and input
queues are equal, which is exactly value equality here. A merged network can then be a set
of nodes and cannot depend on the order in which queries were registered.

Every node has a canonical text (``canonical``) that spells it with sorted parameters, so
equality, hashing and ordering all go through one injective string.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from enum import Enum
from functools import cached_property
from typing import ClassVar

from streamshield.network.predicates import Conjunction


class WindowKind(Enum):
    """CQL windows: the last n rows, the last t time units (optionally sliding), or all."""

    ROWS = "ROWS"
    RANGE = "RANGE"
    UNBOUNDED = "UNBOUNDED"


@dataclass(frozen=True)
class WindowSpec:
    """A window specification (the paper's synopsis ``syn``: type and size)."""

    kind: WindowKind
    size: int | None = None
    slide: int | None = None
    time_attribute: str = "ts"

    def __post_init__(self) -> None:
        if self.kind is WindowKind.UNBOUNDED:
            if self.size is not None or self.slide is not None:
                raise ValueError("an UNBOUNDED window has no size or slide")
        elif self.size is None or self.size <= 0:
            raise ValueError(f"a {self.kind.value} window needs a positive size")
        if self.kind is WindowKind.ROWS and self.slide is not None:
            raise ValueError("a ROWS window has no slide")
        if self.slide is not None and self.slide <= 0:
            raise ValueError("a window slide must be positive")
        if self.kind is not WindowKind.RANGE:
            # Only RANGE windows read time; fixing the field keeps equal windows equal.
            object.__setattr__(self, "time_attribute", "ts")

    @classmethod
    def rows(cls, n: int) -> WindowSpec:
        return cls(WindowKind.ROWS, n)

    @classmethod
    def range(cls, t: int, slide: int | None = None, time_attribute: str = "ts") -> WindowSpec:
        return cls(WindowKind.RANGE, t, slide, time_attribute)

    @classmethod
    def unbounded(cls) -> WindowSpec:
        return cls(WindowKind.UNBOUNDED)

    @cached_property
    def canonical(self) -> str:
        if self.kind is WindowKind.UNBOUNDED:
            return "UNBOUNDED"
        if self.kind is WindowKind.ROWS:
            return f"ROWS {self.size}"
        slide = f" SLIDE {self.slide}" if self.slide is not None else ""
        return f"RANGE {self.size}{slide} ON {self.time_attribute!r}"


def input_canonical(item: str | Operator) -> str:
    """A stream name is spelled as a quoted name, a node by its canonical form."""
    return f"stream {item!r}" if isinstance(item, str) else item.canonical


class Operator:
    """Base of all nodes: equality, hashing and order by canonical text."""

    kind: ClassVar[str]
    arity: ClassVar[tuple[int, int | None]]  # (min, max) inputs; None = unbounded
    inputs: tuple[str | Operator, ...]

    def _check_inputs(self) -> None:
        low, high = self.arity
        n = len(self.inputs)
        if n < low or (high is not None and n > high):
            raise ValueError(f"{self.kind} takes {self.arity} inputs, got {n}")
        for item in self.inputs:
            if not isinstance(item, str | Operator) or item == "":
                raise ValueError(f"{self.kind} input must be a stream name or a node")

    @property
    def parameters(self) -> str:
        """The label's parameter and synopsis part, canonically spelled."""
        raise NotImplementedError

    @cached_property
    def label(self) -> str:
        """Def. 5's label without the input queue: what the node computes."""
        return f"{self.kind}[{self.parameters}]"

    @cached_property
    def canonical(self) -> str:
        inputs = ", ".join(input_canonical(i) for i in self.inputs)
        return f"{self.label}({inputs})"

    @cached_property
    def _hash(self) -> int:
        return hash(self.canonical)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Operator):
            return NotImplemented
        return self._hash == other._hash and self.canonical == other.canonical

    def __lt__(self, other: Operator) -> bool:
        return self.canonical < other.canonical

    def __repr__(self) -> str:
        return self.canonical

    @property
    def children(self) -> tuple[Operator, ...]:
        return tuple(i for i in self.inputs if isinstance(i, Operator))

    @cached_property
    def streams(self) -> frozenset[str]:
        """The input streams the subtree reads."""
        mine = {i for i in self.inputs if isinstance(i, str)}
        return frozenset(mine).union(*(c.streams for c in self.children))

    def with_inputs(self, inputs: Iterable[str | Operator]) -> Operator:
        return replace(self, inputs=tuple(inputs))  # type: ignore[type-var]

    def nodes(self) -> Iterator[Operator]:
        """Every node of the subtree once, children before parents."""
        seen: set[Operator] = set()

        def walk(node: Operator) -> Iterator[Operator]:
            if node in seen:
                return
            seen.add(node)
            for child in node.children:
                yield from walk(child)
            yield node

        yield from walk(self)

    @cached_property
    def height(self) -> int:
        return 1 + max((c.height for c in self.children), default=0)


@dataclass(frozen=True, eq=False, repr=False)
class Window(Operator):
    """A window over one input (the paper's seq-win node with its synopsis)."""

    kind: ClassVar[str] = "window"
    arity: ClassVar[tuple[int, int | None]] = (1, 1)
    spec: WindowSpec
    inputs: tuple[str | Operator, ...]

    def __post_init__(self) -> None:
        self._check_inputs()

    @property
    def parameters(self) -> str:
        return self.spec.canonical


@dataclass(frozen=True, eq=False, repr=False)
class Select(Operator):
    """A conjunctive selection; non-blocking, so it may overlap with others (Def. 7)."""

    kind: ClassVar[str] = "select"
    arity: ClassVar[tuple[int, int | None]] = (1, 1)
    predicate: Conjunction
    inputs: tuple[str | Operator, ...]

    def __post_init__(self) -> None:
        self._check_inputs()
        if not self.predicate.conjuncts:
            raise ValueError("a select needs at least one comparison (TRUE is no operator)")

    @property
    def parameters(self) -> str:
        return self.predicate.canonical


@dataclass(frozen=True, eq=False, repr=False)
class Project(Operator):
    """A projection to a set of attributes; non-blocking, so it may overlap (Def. 7)."""

    kind: ClassVar[str] = "project"
    arity: ClassVar[tuple[int, int | None]] = (1, 1)
    attributes: frozenset[str]
    inputs: tuple[str | Operator, ...]

    def __post_init__(self) -> None:
        self._check_inputs()
        object.__setattr__(self, "attributes", frozenset(self.attributes))

    @property
    def parameters(self) -> str:
        return ", ".join(repr(a) for a in sorted(self.attributes))


@dataclass(frozen=True, eq=False, repr=False)
class Join(Operator):
    """An equi-join of two inputs, each windowed by the synopsis when one is given.

    ``condition`` pairs a left attribute with a right attribute; the input order matters
    (left attributes win a name clash in the joined row), so it is kept as written.
    """

    kind: ClassVar[str] = "join"
    arity: ClassVar[tuple[int, int | None]] = (2, 2)
    condition: frozenset[tuple[str, str]]
    window: WindowSpec | None
    inputs: tuple[str | Operator, ...]

    def __post_init__(self) -> None:
        self._check_inputs()
        object.__setattr__(self, "condition", frozenset(self.condition))

    @property
    def parameters(self) -> str:
        on = " AND ".join(f"{left!r} = {right!r}" for left, right in sorted(self.condition))
        window = self.window.canonical if self.window is not None else "NOW"
        return f"{on or 'TRUE'}; {window}"


class Aggregation(Enum):
    COUNT = "count"
    SUM = "sum"
    MIN = "min"
    MAX = "max"
    AVG = "avg"


@dataclass(frozen=True, eq=False, repr=False)
class Aggregate(Operator):
    """A grouped aggregate of one attribute (``*`` for COUNT(*)); blocking, never overlaps."""

    kind: ClassVar[str] = "aggregate"
    arity: ClassVar[tuple[int, int | None]] = (1, 1)
    function: Aggregation
    attribute: str
    group_by: frozenset[str]
    inputs: tuple[str | Operator, ...]

    def __post_init__(self) -> None:
        self._check_inputs()
        object.__setattr__(self, "group_by", frozenset(self.group_by))
        if self.attribute == "*" and self.function is not Aggregation.COUNT:
            raise ValueError("only COUNT takes '*'")

    @property
    def output_attribute(self) -> str:
        return f"{self.function.value}({self.attribute})"

    @property
    def parameters(self) -> str:
        group = ", ".join(repr(a) for a in sorted(self.group_by))
        return f"{self.function.value}({self.attribute!r}); GROUP BY {group}"


@dataclass(frozen=True, eq=False, repr=False)
class Union(Operator):
    """A bag union; its inputs are kept in canonical order since UNION is commutative."""

    kind: ClassVar[str] = "union"
    arity: ClassVar[tuple[int, int | None]] = (2, None)
    inputs: tuple[str | Operator, ...]

    def __post_init__(self) -> None:
        self._check_inputs()
        object.__setattr__(self, "inputs", tuple(sorted(self.inputs, key=input_canonical)))

    @property
    def parameters(self) -> str:
        return ""


# Short constructors: trees in tests and docs read like the papers' figures.


def window(spec: WindowSpec, source: str | Operator) -> Window:
    return Window(spec, (source,))


def select(predicate: Conjunction, source: str | Operator) -> Select:
    return Select(predicate, (source,))


def project(attributes: Iterable[str], source: str | Operator) -> Project:
    return Project(frozenset(attributes), (source,))


def join(
    condition: Iterable[tuple[str, str]],
    left: str | Operator,
    right: str | Operator,
    window: WindowSpec | None = None,
) -> Join:
    return Join(frozenset(condition), window, (left, right))


def aggregate(
    function: Aggregation, attribute: str, group_by: Iterable[str], source: str | Operator
) -> Aggregate:
    return Aggregate(function, attribute, frozenset(group_by), (source,))


def union(*sources: str | Operator) -> Union:
    return Union(tuple(sources))
