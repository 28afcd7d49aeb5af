"""Fixed-width bitsets encoded as signed 64-bit words, the shape Spark can check natively.

Security labels (sets of roles, of source streams, of companies) travel inside every tuple
as columns. Storing them as integer bitsets lets Spark evaluate policy with native bitwise
expressions (``bitwiseAND``, ``!= 0``, ``bit_and``/``bit_or`` aggregates) instead of slow
Python UDFs over string arrays.

Spark's ``bigint`` is a *signed* 64-bit integer, so a set over ``n`` members is encoded as
``ceil(n / 64)`` signed words: the member with index ``i`` is bit ``i % 64`` of word
``i // 64``. Bit 63 of a word is the sign bit (two's complement), so such words are
negative. Splitting into several words means any number of members works (500+ roles).

All arithmetic is done on Python ints in unsigned form and converted back with
:func:`to_signed`, so every value handed out is exactly what a ``LongType`` column holds.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

WORD_BITS = 64
_WORD_MASK = (1 << WORD_BITS) - 1
_SIGN_BIT = 1 << (WORD_BITS - 1)
_MIN_SIGNED = -(1 << (WORD_BITS - 1))
_MAX_SIGNED = (1 << (WORD_BITS - 1)) - 1

M = TypeVar("M", bound=Hashable)
"""A codec's member type (role, stream and company names are ``str``)."""

Words = tuple[int, ...]
"""One label: signed 64-bit ints in ``[-2**63, 2**63 - 1]``, as a Spark LongType holds."""


def words_for(n_members: int) -> int:
    """Number of words for ``n_members``; never 0, so even an empty universe has a column."""
    if n_members < 0:
        raise ValueError(f"member count must be non-negative, got {n_members}")
    return max(1, -(-n_members // WORD_BITS))


def to_signed(u: int) -> int:
    """Reinterpret an unsigned 64-bit value as the signed value Spark stores."""
    if not 0 <= u <= _WORD_MASK:
        raise ValueError(f"not an unsigned 64-bit value: {u}")
    return u - (1 << WORD_BITS) if u & _SIGN_BIT else u


def to_unsigned(s: int) -> int:
    """Reinterpret a signed 64-bit word as unsigned so bit positions are easy to reason about."""
    if not _MIN_SIGNED <= s <= _MAX_SIGNED:
        raise ValueError(f"not a signed 64-bit value: {s}")
    return s & _WORD_MASK


def _check_same_width(a: Words, b: Words) -> None:
    # Labels from different codecs (or widths) are incomparable; mixing them is a bug.
    if len(a) != len(b):
        raise ValueError(f"word count mismatch: {len(a)} != {len(b)}")


def union(a: Words, b: Words) -> Words:
    """Set union; e.g. combining the sources a derived tuple came from."""
    _check_same_width(a, b)
    return tuple(x | y for x, y in zip(a, b, strict=True))


def intersect(a: Words, b: Words) -> Words:
    """Set intersection."""
    _check_same_width(a, b)
    return tuple(x & y for x, y in zip(a, b, strict=True))


def difference(a: Words, b: Words) -> Words:
    """Members of ``a`` not in ``b``."""
    _check_same_width(a, b)
    # For signed Python ints ``~y`` is the two's complement negation, so the result stays
    # within the signed 64-bit range.
    return tuple(x & ~y for x, y in zip(a, b, strict=True))


def is_subset(a: Words, b: Words) -> bool:
    """True if every member of ``a`` is in ``b``."""
    _check_same_width(a, b)
    return all(x & ~y == 0 for x, y in zip(a, b, strict=True))


def intersects(a: Words, b: Words) -> bool:
    """True if any member is shared; mirrors Spark's ``bitwiseAND(...) != 0`` per word."""
    _check_same_width(a, b)
    return any(x & y != 0 for x, y in zip(a, b, strict=True))


def is_empty(a: Words) -> bool:
    """True if no bit is set in any word."""
    return all(x == 0 for x in a)


class UnknownMemberError(KeyError):
    """A name outside the codec's universe; dropping it silently could widen access."""

    def __str__(self) -> str:
        # KeyError.__str__ would repr() the message; show it plainly instead.
        return str(self.args[0]) if self.args else super().__str__()


class BitsetCodec(Generic[M]):
    """Maps a fixed, ordered universe of member names to and from :data:`Words`.

    The order is part of the encoding: the same names in another order give different
    words, so a codec must be built from the same ordered list wherever labels are shared.
    """

    def __init__(self, members: Iterable[M], width: int | None = None) -> None:
        """``width``: a fixed word count (at least what the members need), so that
        members appended later keep every existing label's shape."""
        ordered = tuple(members)
        index: dict[M, int] = {}
        for i, m in enumerate(ordered):
            if m in index:
                raise ValueError(f"duplicate member {m!r} at positions {index[m]} and {i}")
            index[m] = i
        self._members = ordered
        self._index = index
        self._width = words_for(len(ordered))
        if width is not None:
            if width < self._width:
                raise ValueError(f"{len(ordered)} members do not fit in {width} words")
            self._width = width

    def __repr__(self) -> str:
        return f"BitsetCodec({list(self._members)!r})"

    @property
    def members(self) -> tuple[M, ...]:
        """Members in index order."""
        return self._members

    @property
    def width(self) -> int:
        """Number of 64-bit words (Spark columns) every encoded label has."""
        return self._width

    def index(self, member: M) -> int:
        """Bit position of ``member``; unknown names are an error, never ignored."""
        try:
            return self._index[member]
        except KeyError:
            raise UnknownMemberError(
                f"unknown member {member!r}; known members: {len(self._members)}"
            ) from None

    def bit(self, member: M) -> tuple[int, int]:
        """``(word index, signed mask)`` so Spark can test one member against one column."""
        i = self.index(member)
        return i // WORD_BITS, to_signed(1 << (i % WORD_BITS))

    def encode(self, members: Iterable[M]) -> Words:
        """Encode a set of names into exactly :attr:`width` signed words."""
        raw = [0] * self._width
        for m in members:
            i = self.index(m)
            raw[i // WORD_BITS] |= 1 << (i % WORD_BITS)
        return tuple(to_signed(w) for w in raw)

    def decode(self, words: Words) -> frozenset[M]:
        """Decode words back to names; stray bits mean corrupt or foreign data, so reject."""
        if len(words) != self._width:
            raise ValueError(f"expected {self._width} words, got {len(words)}")
        n = len(self._members)
        out: list[M] = []
        for w_idx, word in enumerate(words):
            u = to_unsigned(word)
            base = w_idx * WORD_BITS
            while u:
                low = u & -u
                i = base + low.bit_length() - 1
                if i >= n:
                    raise ValueError(f"bit {i} set but codec has only {n} members")
                out.append(self._members[i])
                u ^= low
        return frozenset(out)

    def empty(self) -> Words:
        """The empty label (all words zero)."""
        return (0,) * self._width

    def full(self) -> Words:
        """The label containing every member; unused high bits stay clear."""
        n = len(self._members)
        words = []
        for w_idx in range(self._width):
            bits = min(WORD_BITS, max(0, n - w_idx * WORD_BITS))
            words.append(to_signed((1 << bits) - 1))
        return tuple(words)
