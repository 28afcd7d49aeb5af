"""Labels as bitset words: the exact shape the Spark engine stores next to each tuple.

The check a secured view runs per tuple is ``(q & readers) != 0 and (q & denied) == 0``
word by word, where ``q`` is the query's effective role set. Defining it here, on
plain ints, lets property tests prove it equal to the set-based decision of
:class:`~streamshield.policy.policy.Label` before any Spark code relies on it.

Privilege twins (see :mod:`~streamshield.policy.privileges`) sit in three blocks of
``ceil(roles / 64)`` words each: READ, then STATISTICS, then GRANT. A label is just
three times wider (64 roles: 1 -> 3 words per reader/denied column set) and keeps its
column shape; the denied words carry the denied roles in every block. A READ query has
zeros outside the READ block, and checks skip zero query words, so the raw-read check
touches exactly the words it touched before twins existed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from streamshield.policy.bitset import BitsetCodec, Words, intersects
from streamshield.policy.policy import Access, Label
from streamshield.policy.privileges import Privilege, query_twins
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
        """Attributes ``query`` passes on (a READ or a STATISTICS mask of the codec)."""
        if not self.tuple_access.allows(query):
            return frozenset()
        return frozenset(a for a, acc in self.attributes.items() if acc.allows(query))


class RoleCodec:
    """Bit positions of a hierarchy's roles (its stable role order), one block per twin."""

    def __init__(self, hierarchy: RoleHierarchy) -> None:
        self.hierarchy = hierarchy
        # one block: a role set, no twins; as wide as the hierarchy's capacity, so that a
        # role appended later changes no existing label (positions and width stay)
        self.codec = BitsetCodec(hierarchy.roles, width=hierarchy.block_words)

    @property
    def block_width(self) -> int:
        """Words of one privilege block."""
        return self.codec.width

    @property
    def width(self) -> int:
        """Words of a whole label component (all three blocks)."""
        return self.codec.width * len(Privilege)

    def block(self, privilege: Privilege) -> range:
        """Word indexes of one privilege's block."""
        start = privilege.block * self.block_width
        return range(start, start + self.block_width)

    def twins(self, roles: Iterable[str], privileges: Iterable[Privilege]) -> Words:
        """``roles`` set in the blocks of ``privileges``, zero elsewhere."""
        block = self.codec.encode(roles)
        wanted = frozenset(privileges)
        empty = self.codec.empty()
        return tuple(w for p in Privilege for w in (block if p in wanted else empty))

    def query(self, activated: Iterable[str], privilege: Privilege = Privilege.READ) -> Words:
        """A query's effective roles as the mask for ``privilege`` (READ: raw reads)."""
        return self.twins(self.hierarchy.effective(activated), query_twins(privilege))

    def denied(self, roles: Iterable[str]) -> Words:
        """Denied roles: every twin."""
        return self.twins(roles, Privilege)

    def access(self, access: Access) -> EncodedAccess:
        readers = [self.codec.encode(access.twin(p)) for p in Privilege]
        return EncodedAccess(
            tuple(w for block in readers for w in block), self.denied(access.denied)
        )

    def decode(self, access: EncodedAccess) -> Access:
        """The role sets of an encoded access (denied read from the READ block)."""
        twins = {p: self.codec.decode(self._slice(access.readers, p)) for p in Privilege}
        return Access(
            twins[Privilege.READ],
            self.codec.decode(self._slice(access.denied, Privilege.READ)),
            twins[Privilege.STATISTICS],
            twins[Privilege.GRANT],
        )

    def _slice(self, words: Words, privilege: Privilege) -> Words:
        block = self.block(privilege)
        return tuple(words[block.start : block.stop])

    def label(self, label: Label) -> EncodedLabel:
        return EncodedLabel(
            self.access(label.tuple_access),
            {a: self.access(acc) for a, acc in label.attributes.items()},
            label.policy_id,
        )
