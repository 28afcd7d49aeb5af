"""Stream definitions: the schema a provider's tuples are checked against on landing.

A definition is what the landing zone validates values with and what the Spark engine
hands to ``from_json``, so both sides agree by construction. Names are restricted to
plain identifiers because they become directory names and SQL column names; labels
live next to the attributes under the reserved ``_ss_`` prefix, so no attribute may
take that prefix and shadow a label column.

Attributes may carry classification tags (``PHI``, ``PII``): a server policy can address
every attribute so tagged (``ATTRIBUTES: TAGGED PHI``, :mod:`streamshield.policy.tag_policies`).
Tags are part of the definition, so a definition with other tags is another definition
and secure ingest compiles its policies again from the next micro-batch.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from typing import TypeAlias, cast

from streamshield.policy.sp_patterns import tag_name

SPARK_TYPES = frozenset({"bigint", "int", "double", "string", "boolean", "timestamp"})
"""Spark SQL types an attribute may have: what ``from_json`` and the landing checks agree on."""

EVENT_TIME_TYPES = frozenset({"timestamp", "bigint"})
RESERVED_PREFIX = "_ss_"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def check_name(name: object, what: str) -> str:
    """The name itself, or ValueError: only identifiers are safe as paths and SQL columns."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"{what} must match [A-Za-z_][A-Za-z0-9_]*, got {name!r}")
    return name


AttributeTags: TypeAlias = tuple[tuple[str, frozenset[str]], ...]
"""Tags per attribute, in attribute order, attributes without tags left out."""
TagsGiven: TypeAlias = Mapping[str, Collection[str]] | AttributeTags
MAX_TAGS_PER_ATTRIBUTE = 64


def attribute_tags(tags: TagsGiven, names: Collection[str], stream: str) -> AttributeTags:
    """``tags`` checked and in their stored form: each attribute named exists, each tag
    is a valid tag name (upper-cased), attributes in ``names`` order, none left empty."""
    given = tags.items() if isinstance(tags, Mapping) else tags
    found: dict[str, frozenset[str]] = {}
    for attribute, attribute_tags in given:
        if attribute not in names:
            raise ValueError(f"tags name {attribute!r}: not an attribute of stream {stream}")
        if isinstance(attribute_tags, str) or len(attribute_tags) > MAX_TAGS_PER_ATTRIBUTE:
            raise ValueError(
                f"attribute {attribute!r}: tags are a list of at most "
                f"{MAX_TAGS_PER_ATTRIBUTE} tag names"
            )
        found[attribute] = found.get(attribute, frozenset()) | {
            tag_name(tag) for tag in attribute_tags
        }
    return tuple((n, found[n]) for n in names if found.get(n))


@dataclass(frozen=True)
class StreamDefinition:
    """A registered stream: ordered attributes with Spark types, its tuple id and event time.

    Type names are normalised to lower case. Attribute names must be unique ignoring
    case, because Spark resolves columns case-insensitively by default.
    """

    name: str
    attributes: tuple[tuple[str, str], ...]
    tid: str
    event_time: str | None = None
    not_null: tuple[str, ...] = ()
    """Attributes a tuple must carry, not null (the landing zone refuses it otherwise);
    the tuple id and the event time always are. Every other attribute may be null."""
    tags: TagsGiven = ()
    """Classification tags per attribute (a mapping or :data:`AttributeTags`); kept as
    :data:`AttributeTags` (hashable: a definition keys compiled policies)."""

    def __post_init__(self) -> None:
        check_name(self.name, "stream name")
        if self.name.startswith("_"):
            # Spark's file source skips paths starting with "_" and "_tmp" is the landing
            # zone's staging directory: such a stream would silently lose its data.
            raise ValueError(f"stream name must not start with '_', got {self.name!r}")
        attributes = tuple(self._attribute(pair) for pair in self.attributes)
        object.__setattr__(self, "attributes", attributes)
        self._check_unique()
        types = dict(attributes)
        if self.tid not in types:
            raise ValueError(f"tid {self.tid!r} is not an attribute of stream {self.name}")
        unknown = [n for n in self.not_null if n not in types]
        if unknown:
            raise ValueError(f"not_null names {unknown}: not attributes of stream {self.name}")
        object.__setattr__(self, "not_null", tuple(dict.fromkeys(self.not_null)))
        object.__setattr__(self, "tags", attribute_tags(self.tags, self.names, self.name))
        if self.event_time is not None and types.get(self.event_time) not in EVENT_TIME_TYPES:
            raise ValueError(
                f"event_time {self.event_time!r} must be an attribute of type "
                f"{' or '.join(sorted(EVENT_TIME_TYPES))}"
            )

    @staticmethod
    def _attribute(pair: tuple[str, str]) -> tuple[str, str]:
        name, spark_type = pair
        check_name(name, "attribute name")
        if name.lower().startswith(RESERVED_PREFIX):
            raise ValueError(f"attribute names starting with {RESERVED_PREFIX!r} are reserved")
        normalised = spark_type.lower() if isinstance(spark_type, str) else spark_type
        if normalised not in SPARK_TYPES:
            raise ValueError(
                f"attribute {name!r}: type {spark_type!r} is not one of {sorted(SPARK_TYPES)}"
            )
        return name, normalised

    def _check_unique(self) -> None:
        seen: set[str] = set()
        for name, _ in self.attributes:
            if name.lower() in seen:
                raise ValueError(f"duplicate attribute {name!r} in stream {self.name}")
            seen.add(name.lower())

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.attributes)

    @property
    def tags_of(self) -> dict[str, frozenset[str]]:
        """Attribute name to its tags (attributes without tags are absent)."""
        return dict(cast(AttributeTags, self.tags))

    def tagged(self, tags: Collection[str]) -> tuple[str, ...]:
        """The attributes carrying any of ``tags`` (stored form), in attribute order."""
        wanted = frozenset(tags)
        return tuple(n for n, have in cast(AttributeTags, self.tags) if have & wanted)

    def retagged(self, tags: TagsGiven) -> StreamDefinition:
        """The same stream with these tags instead (checked as on creation)."""
        return replace(self, tags=tags)

    @property
    def types(self) -> dict[str, str]:
        """Attribute name to Spark type name."""
        return dict(self.attributes)

    @property
    def ddl(self) -> str:
        """The schema in Spark DDL, as ``from_json(col, ddl)`` reads it."""
        return ", ".join(f"`{n}` {t}" for n, t in self.attributes)
