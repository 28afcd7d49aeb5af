"""Labels as bitset words: the exact shape the Spark engine stores next to each tuple.

The check a secured view runs per tuple is ``(q & readers) != 0 and (q & denied) == 0``
word by word, where ``q`` is the query's effective role set. Defining it here, on
plain ints, lets property tests prove it equal to the set-based decision of
:class:`~streamshield.policy.policy.Label` before any Spark code relies on it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from streamshield.policy.bitset import BitsetCodec, Words, intersects
from streamshield.policy.policy import Access, Label
from streamshield.policy.roles import RoleHierarchy


@dataclass(frozen=True)
class EncodedAccess:
    readers: Words
    denied: Words

    def allows(self, query: Words) -> bool:
        return intersects(query, self.readers) and not intersects(query, self.denied)


@dataclass(frozen=True)
class EncodedLabel:
    tuple_access: EncodedAccess
    attributes: Mapping[str, EncodedAccess]
    policy_id: str | None

    def visible_attributes(self, query: Words) -> frozenset[str]:
        if not self.tuple_access.allows(query):
            return frozenset()
        return frozenset(a for a, acc in self.attributes.items() if acc.allows(query))


class RoleCodec:
    """Bit positions of a hierarchy's roles (its stable role order)."""

    def __init__(self, hierarchy: RoleHierarchy) -> None:
        self.hierarchy = hierarchy
        self.codec = BitsetCodec(hierarchy.roles)

    @property
    def width(self) -> int:
        return self.codec.width

    def query(self, activated: Iterable[str]) -> Words:
        """A query's effective roles as words."""
        return self.codec.encode(self.hierarchy.effective(activated))

    def access(self, access: Access) -> EncodedAccess:
        return EncodedAccess(self.codec.encode(access.readers), self.codec.encode(access.denied))

    def label(self, label: Label) -> EncodedLabel:
        return EncodedLabel(
            self.access(label.tuple_access),
            {a: self.access(acc) for a, acc in label.attributes.items()},
            label.policy_id,
        )
