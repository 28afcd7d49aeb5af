"""Provenance labels of SecFilter (paper 5, section 3.2): the source streams a tuple came from.

Borealis put a 32-bit source vector in every tuple header; here a provenance is a
:mod:`~streamshield.policy.bitset` label over the registered streams, so any number of
sources works. A tuple gets ``{its stream}`` on entry, operators OR provenances
together (join, aggregate, union), and delivery checks the result against the
subscriber's rights *at delivery time*.

Bit positions follow the catalog's registration order and a new stream only appends,
so a label computed before a stream was added still means the same sources after it.
A derived stream (a query's output registered as a stream) carries the union of its
sources' provenance: reading it raw then still needs READ on every base source.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from streamshield.policy.bitset import BitsetCodec, Words, is_empty, is_subset


class ProvenanceCodec:
    """Stream names to provenance words, stable as streams are added."""

    def __init__(
        self, streams: Iterable[str], derived: Mapping[str, Iterable[str]] | None = None
    ) -> None:
        self._bits = BitsetCodec(streams)
        flat: dict[str, frozenset[str]] = {}
        for name, sources in (derived or {}).items():
            if name in flat:
                raise ValueError(f"derived stream {name!r} given twice")
            flat[name] = self._flatten(sources, flat)
        self._derived: dict[str, frozenset[str]] = flat

    def __repr__(self) -> str:
        return f"ProvenanceCodec({list(self.streams)!r}, derived={dict(self._derived)!r})"

    @property
    def streams(self) -> tuple[str, ...]:
        """Base streams in bit order (the catalog's registration order)."""
        return tuple(str(s) for s in self._bits.members)

    @property
    def derived(self) -> dict[str, frozenset[str]]:
        """Derived streams and the base streams they come from."""
        return dict(self._derived)

    @property
    def width(self) -> int:
        """Words (``_ss_src_*`` columns) of every provenance label."""
        return self._bits.width

    def appended(self, streams: Iterable[str]) -> ProvenanceCodec:
        """This codec with new streams added after the known ones (known names are kept)."""
        known = set(self.streams)
        new = [s for s in dict.fromkeys(streams) if s not in known]
        return ProvenanceCodec([*self.streams, *new], self._derived)

    def derive(self, name: str, sources: Iterable[str]) -> ProvenanceCodec:
        """This codec plus a derived stream whose provenance is the union of ``sources``'.

        The derived stream may also be registered as a stream (and so have a bit of its
        own): its tuples still carry its sources' bits, which is what delivery checks.
        """
        if name in self._derived:
            raise ValueError(f"derived stream {name!r} already has a provenance")
        return ProvenanceCodec(self.streams, {**self._derived, name: self._flatten(sources)})

    def sources_of(self, stream: str) -> frozenset[str]:
        """The base streams a stream's tuples come from; unknown streams are an error.

        A derived stream's sources win over a bit it may have as a registered stream.
        """
        if stream in self._derived:
            return self._derived[stream]
        self._bits.index(stream)  # UnknownMemberError: a label never omits a source
        return frozenset({stream})

    def label(self, stream: str) -> Words:
        """Provenance of every tuple of ``stream`` (base or derived) on entry."""
        return self._bits.encode(self.sources_of(stream))

    def encode(self, sources: Iterable[str]) -> Words:
        """Provenance over base streams; an unknown name is an error, never dropped."""
        return self._bits.encode(sources)

    def decode(self, words: Words) -> frozenset[str]:
        return frozenset(str(s) for s in self._bits.decode(words))

    def readable(self, streams: Iterable[str]) -> Words:
        """Rights as words; names without a bit are ignored, which can only deny more.

        A right on a derived stream grants nothing here: its tuples carry the bits of
        its base sources (strong semantic).
        """
        known = set(self.streams)
        return self._bits.encode(s for s in streams if s in known)

    def _flatten(
        self, sources: Iterable[str], derived: Mapping[str, frozenset[str]] | None = None
    ) -> frozenset[str]:
        derived = self._derived if derived is None else derived
        out: set[str] = set()
        for source in sources:
            if source in derived:
                out |= derived[source]
            else:
                self._bits.index(source)
                out.add(source)
        if not out:
            raise ValueError("a derived stream needs at least one source")
        return frozenset(out)


@dataclass(frozen=True)
class Rights:
    """A subscriber's current SecFilter rights: streams with READ TUPLE and READ AGGREGATE."""

    read: frozenset[str] = frozenset()
    aggregate: frozenset[str] = frozenset()

    @classmethod
    def of(cls, value: object) -> Rights:
        """Rights from a lookup's answer (a Rights or a ``(read, aggregate)`` pair).

        Anything else is a TypeError, which delivery turns into "deliver nothing".
        A single string would otherwise read as a set of one-letter stream names.
        """
        if isinstance(value, Rights):
            return value
        if isinstance(value, tuple) and len(value) == 2:
            read, aggregate = value
            if not isinstance(read, str | bytes) and not isinstance(aggregate, str | bytes):
                read, aggregate = frozenset(read), frozenset(aggregate)
                if all(isinstance(s, str) for s in read | aggregate):
                    return cls(read, aggregate)
        raise TypeError("rights must be Rights or a pair of sets of stream names")

    def sources(self, aggregate_row: bool) -> frozenset[str]:
        """Streams a row may come from: READ, plus READ AGGREGATE for an aggregate's row."""
        return self.read | self.aggregate if aggregate_row else self.read


NO_RIGHTS = Rights()
"""What a subscriber has when the lookup fails: nothing is delivered."""


def delivers(provenance: Words, readable: Words) -> bool:
    """SecFilter's strong semantic: READ on every source, and at least one source.

    A tuple with no source at all was never labelled on entry: deny it rather than
    treat "no sources" as "nothing to check". Words beyond ``readable``'s width are
    sources the rights cannot name, so they must be zero.
    """
    padded = tuple(readable) + (0,) * max(0, len(provenance) - len(readable))
    return not is_empty(provenance) and is_subset(provenance, padded[: len(provenance)])
