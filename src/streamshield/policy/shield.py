"""The reference Security Shield: paper 1, Fig. 10, one state machine per channel.

This is the executable specification of "which policy is in force for a tuple";
the Spark engine must reach the same decision for every tuple. It follows Fig. 10
with two choices made explicit where the figure is silent:

* The policy is fixed at its first tuple (the end of the sp batch). An sp with the
  current policy's timestamp that arrives after that is late and discarded.
* An sp older than the newest policy timestamp seen on the channel is discarded even
  after a reset has emptied the current policy, so a replayed old policy cannot come
  back (Theorem 5.1, case 2: "it will be discarded ... as it has arrived out of order").

A tuple whose declared (ts, csn) does not match the current policy is denied and
the current policy is dropped (line 16), so the rest of that segment is denied too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from streamshield.policy.elements import Channel, Element, SpElement, TupleElement
from streamshield.policy.policy import Label, Policy, PolicyError, ServerPolicy, label_for
from streamshield.policy.punctuation import SecurityPunctuation
from streamshield.policy.roles import RoleHierarchy
from streamshield.policy.tag_policies import server_policy_for


class Reason(Enum):
    """Why a tuple passed or was denied; every denial is explainable."""

    PASS = "pass"
    NO_POLICY = "no policy"
    INCOMPLETE_POLICY = "incomplete policy"
    OUT_OF_ORDER = "out of order"
    INVALID_POLICY = "invalid policy"
    UNKNOWN_STREAM = "unknown stream"
    NOT_AUTHORIZED = "not authorized"


class SpVerdict(Enum):
    ADDED = "added to the current policy"
    NEW_POLICY = "started a new policy"
    DUPLICATE = "duplicate of an sp already held"
    STALE = "older than the newest policy: discarded"
    LATE = "arrived after its policy's first tuple: discarded"


@dataclass
class PolicyTracker:
    """Fig. 10 state for one channel, independent of who asks: which policy is in force."""

    current: list[SecurityPunctuation] = field(default_factory=list)
    current_ts: int = 0  # 0: no policy in state
    first_tuple: bool = True
    newest_ts: int = 0  # high-water mark of policy timestamps seen on the channel
    frozen: Policy | None = None  # the policy as fixed at its first tuple
    conflict: bool = False

    def on_sp(self, sp: SecurityPunctuation) -> SpVerdict:
        if sp.ts < self.newest_ts:
            return SpVerdict.STALE
        if sp.ts == self.current_ts and self.current_ts != 0:
            if not self.first_tuple:
                return SpVerdict.LATE
            if sp in self.current:
                return SpVerdict.DUPLICATE
            if any(held.sn == sp.sn for held in self.current):
                self.conflict = True
            self.current.append(sp)
            return SpVerdict.ADDED
        self._reset()
        self.current, self.current_ts, self.newest_ts = [sp], sp.ts, sp.ts
        return SpVerdict.NEW_POLICY

    def on_tuple(self, policy_ts: int, policy_csn: int) -> tuple[Reason, Policy | None]:
        """The policy in force for a tuple declaring (policy_ts, policy_csn), or why none is."""
        if self.current_ts == 0:
            return Reason.NO_POLICY, None
        if self.first_tuple:
            self.first_tuple = False
            self.frozen = None if self.conflict else Policy.of(self.current)
        if policy_ts != self.current_ts:
            self._reset()
            return Reason.OUT_OF_ORDER, None
        if self.frozen is None:
            self._reset()
            return Reason.INVALID_POLICY, None
        if not self.frozen.is_complete(policy_csn):
            self._reset()
            return Reason.INCOMPLETE_POLICY, None
        return Reason.PASS, self.frozen

    def _reset(self) -> None:
        self.current, self.current_ts, self.first_tuple = [], 0, True
        self.frozen, self.conflict = None, False

    def snapshot(self, encode: Callable[[SecurityPunctuation], str]) -> dict[str, Any]:
        """The tracker as JSON-ready data; ``encode`` writes an sp (the wire format is the
        language layer's, not the policy core's)."""
        return {
            "current": [encode(sp) for sp in self.current],
            "current_ts": self.current_ts,
            "first_tuple": self.first_tuple,
            "newest_ts": self.newest_ts,
            "frozen": None if self.frozen is None else [encode(sp) for sp in self.frozen.sps],
            "conflict": self.conflict,
        }

    @classmethod
    def restore(
        cls, data: Mapping[str, Any], decode: Callable[[str], SecurityPunctuation]
    ) -> PolicyTracker:
        """The tracker :meth:`snapshot` saved (KeyError/TypeError/ValueError if it is not)."""
        frozen = data["frozen"]
        return cls(
            current=[decode(x) for x in data["current"]],
            current_ts=data["current_ts"],
            first_tuple=data["first_tuple"],
            newest_ts=data["newest_ts"],
            frozen=None if frozen is None else Policy.of(decode(x) for x in frozen),
            conflict=data["conflict"],
        )


@dataclass(frozen=True)
class Decision:
    """The shield's verdict on one tuple for one query."""

    element: TupleElement
    reason: Reason
    policy_id: str | None = None
    attributes: frozenset[str] = frozenset()  # attributes the query sees unmasked

    @property
    def passed(self) -> bool:
        return self.reason is Reason.PASS


@dataclass(frozen=True)
class Forward:
    """A complete policy sent downstream once, just before its first passing tuple."""

    channel: Channel
    policy: Policy


@dataclass(frozen=True)
class Schema:
    """What the shield needs to know of a stream: its attribute names and their tags."""

    attributes: Sequence[str]
    tags: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """Classification tags per attribute, stored form (what ``TAGGED`` resolves against)."""


@dataclass
class SecurityShield:
    """Fig. 10 for one query: filters tuples for ``roles`` and forwards policies once.

    ``roles`` are the query's activated roles; the shield works with their effective
    set (plus juniors). ``propagate`` is the paper's PFF flag.
    """

    hierarchy: RoleHierarchy
    roles: Iterable[str]
    schemas: dict[str, Schema]
    server: dict[str, ServerPolicy] = field(default_factory=dict)
    propagate: bool = True
    trackers: dict[Channel, PolicyTracker] = field(default_factory=dict)
    sent: dict[Channel, Policy] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.effective = self.hierarchy.effective(self.roles)

    def label(self, policy: Policy, element: TupleElement) -> Label:
        """The label the policy gives to this tuple; PolicyError when it cannot be used."""
        stream = element.channel.stream
        schema = self.schemas[stream]
        server = server_policy_for(self.server, stream, schema.attributes, schema.tags)
        return label_for(policy, stream, element.tid, schema.attributes, self.hierarchy, server)

    def process(self, elements: Iterable[Element]) -> Iterator[Decision | Forward]:
        """Decisions for tuples, in element order, with forwarded policies before them."""
        for element in elements:
            tracker = self.trackers.setdefault(element.channel, PolicyTracker())
            if isinstance(element, SpElement):
                tracker.on_sp(element.sp)
                continue
            yield from self._decide(tracker, element)

    def _decide(
        self, tracker: PolicyTracker, element: TupleElement
    ) -> Iterator[Decision | Forward]:
        if element.channel.stream not in self.schemas:
            yield Decision(element, Reason.UNKNOWN_STREAM)
            return
        reason, policy = tracker.on_tuple(element.policy_ts, element.policy_csn)
        if policy is None:
            yield Decision(element, reason)
            return
        try:
            label = self.label(policy, element)
        except PolicyError:
            yield Decision(element, Reason.INVALID_POLICY, policy.policy_id)
            return
        if not label.visible(self.effective):
            yield Decision(element, Reason.NOT_AUTHORIZED, policy.policy_id)
            return
        if self.propagate and self.sent.get(element.channel) is not policy:
            self.sent[element.channel] = policy
            yield Forward(element.channel, policy)
        yield Decision(
            element, Reason.PASS, policy.policy_id, label.visible_attributes(self.effective)
        )

    def decisions(self, elements: Iterable[Element]) -> list[Decision]:
        """Only the per-tuple decisions, for callers that do not care about forwarding."""
        return [out for out in self.process(elements) if isinstance(out, Decision)]
