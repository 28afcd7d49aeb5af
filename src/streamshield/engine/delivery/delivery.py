"""Delivery: SecFilter at the output of a query, with each recipient's rights of *now*.

Rights change while a query runs (revocation, grants); the query itself was checked
once, at registration, with its owner's roles. So every micro-batch, for every
subscriber, delivery reads the subscriber's current rights once and lets a row through
only if

- its provenance is a non-empty subset of the streams the subscriber may READ (strong
  semantic), or, for an aggregate query's rows, of READ plus READ AGGREGATE; and
- the subscriber's *own* active roles may read it, per tuple and per attribute, under
  the labels the row carries (:mod:`~streamshield.engine.delivery.recipient_check`): what she
  could not have read at the sources is dropped (rows) or masked (columns), exactly
  as if she had registered the query herself; and
- her session's *current* Chinese-Wall level dominates the row's level (the LUB of
  the levels of the tuples it came from, ``_ss_lvl_*``): the recipient decides
  (DESIGN.md 5a), whatever level the query ran at. While levels are on, a row without
  level words reaches no one.

A revocation therefore takes effect with the next micro-batch, also for results
computed before it (a change another process makes to the catalog: once the server's
catalog view has read the new version, within its poll period; docs/security.md).

The check is a native condition per *distinct* (rights, roles, level) class
(subscribers with equal ones share it); Python runs per micro-batch, per class and per
subscriber only. One Spark job per batch does all of it: a row any class may have is
collected once, with one column per class holding what that class gets (NULL: not
hers), and the rows each class did not get are counted while that job runs
(:mod:`~streamshield.engine.delivery.observed_collect`). Separate jobs per class, an emptiness
check and a drop-count aggregate cost a job's fixed overhead each (0.1-0.2 s on small
batches) and a cache to share one read. Rights are read just before that job: the
window between reading them and handing rows over is one job over the batch (in the
server, over its cached rows, before they are stored). A rights or roles lookup that
fails or answers nonsense delivers nothing.

Over a frame that is a local relation (a shared network's small pass, held on the driver
where it was written: engine/frames/driver_rows.py), the same plan's picks and the drops as
per-row flags are computed by Spark on the driver while it plans, with no job at all
(``collected_rows.collect_on_driver``); the counts are then summed over those flags. The
checks are the same Catalyst expressions either way; if the driver cannot compute them,
the job runs as above.
"""

from __future__ import annotations

import hashlib
import logging
import operator
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import reduce
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from streamshield.engine.delivery.collected_rows import (
    CollectedRows,
    Drops,
    collect_on_driver,
    collect_rows,
    drop_flags,
)
from streamshield.engine.delivery.recipient_check import OutputLabels
from streamshield.engine.views.level_columns import dominated_words, level_columns
from streamshield.engine.views.provenance_columns import delivered, provenance_columns
from streamshield.lang.recipient_labels import slot_of
from streamshield.policy.bitset import Words, is_empty
from streamshield.policy.provenance import NO_RIGHTS, ProvenanceCodec, Rights
from streamshield.policy.punctuation import Sign
from streamshield.policy.query_level import LEVEL_PREFIX

audit = logging.getLogger("streamshield.audit")

LABEL_PREFIX = "_ss_"
POLICY_COLUMN = "_ss_policy"
TUPLE_ORIGIN = "_ss_seq"
MASKED = "_ss_masked"
"""Output columns a row has masked; handed over as ``_masked`` (hidden is not null)."""
"""Rows carrying a tuple's sequence number are raw tuples, whatever the query claims."""

RightsLookup = Callable[[str], "Rights | tuple[set[str], set[str]]"]
RolesLookup = Callable[["Subscription"], Words]
"""A subscriber's active roles now, as the READ query mask (``RoleCodec.query``)."""
LevelLookup = Callable[["Subscription"], "Words | None"]
"""A subscriber's session level now, encoded (``Lattice.encode``); None: levels are off."""
_LEVELS_OFF = None
Deliver = Callable[..., None]
"""Called with a batch's rows, and its batch id too when the subscription is ``batched``."""
Key = tuple[Words, Words, "Words | None"]  # rights, roles mask, level: one filter each
DropHook = Callable[[str, int, int, tuple[str, ...]], None]
"""``on_drop(user, batch_id, count, policy_ids)``: what a subscriber did not get, no values."""


@dataclass(frozen=True)
class ClassPlan:
    """What one class of recipients needs of a delivery job: built once per distinct
    (output columns, rights, roles, level, exemption) and reused batch after batch, and
    by every output of one job whose rows are the same (equal names: equal columns)."""

    condition: Column
    """The row is this class's (its output's rows, and her checks pass)."""
    pick: Column
    """The struct the class gets (NULL: not its row), named :attr:`name`."""
    name: str
    metrics: tuple[Column, ...]
    """Its drop count and the dropped rows' policy ids (none: drops are not reported)."""
    drops: tuple[str, str]
    """The names of :attr:`metrics`."""
    counted: Drops | None = None
    """:attr:`metrics` as per-row flags (whether she missed the row, its policy id), for
    a batch whose rows are computed on the driver (collected_rows.collect_on_driver)."""


@dataclass(frozen=True, eq=False)
class Planned:
    """One batch's delivery, planned (:meth:`Delivery.plan`): its job's parts and whom
    each part's rows go to."""

    classes: dict[Key, list[Subscription]]
    parts: dict[Key, ClassPlan]
    live: list[Key]
    """The classes that may read something, in the order of ``picks``."""

    @property
    def picks(self) -> list[Column]:
        return [self.parts[k].pick for k in self.live]

    @property
    def metrics(self) -> list[Column]:
        return [m for part in self.parts.values() for m in part.metrics]

    @property
    def counted(self) -> list[Drops]:
        return [part.counted for part in self.parts.values() if part.counted is not None]

    @property
    def wanted(self) -> Column | None:
        """Some live class gets the row (None: no class may read anything)."""
        conditions = [self.parts[k].condition for k in self.live]
        return reduce(operator.or_, conditions) if conditions else None


PlanMemo = dict[tuple, ClassPlan]
"""Class plans of one output frame layout (its columns, ``col`` and ``taken``): whoever
owns that layout owns the memo, so a plan is never reused over another layout."""
_MEMO_LIMIT = 256
"""Class plans kept per memo: rights and roles change rarely; more is churn."""


@dataclass(frozen=True, eq=False)
class Subscription:
    user: str
    deliver: Deliver = field(repr=False)
    session: str = field(default="", repr=False)
    """The subscriber's session (whose active roles ``RolesLookup`` reads)."""
    batched: bool = False
    """``deliver(rows, batch_id)`` instead of ``deliver(rows)``: a subscriber that may
    resume after a batch needs its id."""
    acting: Any = field(default=None, repr=False)
    """A recipient outside any session (a sink: the user and the roles she attached it
    with, :class:`~streamshield.catalog.security.Acting`), read instead of ``session``."""
    id: str = field(default_factory=lambda: uuid.uuid4().hex)


class Delivery:
    """A fan-out sink (``CallbackSink(delivery)``) applying SecFilter per subscriber."""

    def __init__(
        self,
        rights: RightsLookup,
        codec: ProvenanceCodec,
        *,
        roles: RolesLookup,
        aggregate: bool = False,
        on_drop: DropHook | None = None,
        levels: LevelLookup | None = None,
    ) -> None:
        """``aggregate``: the query's output rows are aggregates (READ AGGREGATE applies).
        ``levels``: each subscriber's level now (no lookup: levels are off).

        Leaving it False can only deliver less.
        """
        self._rights, self._codec, self._roles = rights, codec, roles
        self._levels = levels
        self.query_mask: Callable[[], Words] | None = None
        """The query's own roles as a READ mask: a recipient acting with exactly them
        gets the output as it is (it *is* her own query's); set by whoever runs it."""
        self._aggregate, self._on_drop = aggregate, on_drop
        self._subscriptions: dict[str, Subscription] = {}
        self._memos: dict[tuple[str, ...], PlanMemo] = {}
        """Class plans per output layout (the frame's own columns)."""
        self._lock = threading.Lock()
        self.on_handover: Callable[[float], None] | None = None
        """Told the seconds from a batch's arrival here to each hand-over (metrics)."""
        self.on_access: Callable[[str, Sign], None] | None = None
        """Told when a user starts (``+``: her first subscription) or stops (``-``: her
        last one ended) receiving this output: the query-scoped sps of the switches."""

    def subscribe(
        self,
        user: str,
        deliver: Deliver,
        session: str = "",
        *,
        batched: bool = False,
        acting: Any = None,
    ) -> Subscription:
        subscription = Subscription(user, deliver, session, batched, acting)
        with self._lock:
            first = all(s.user != user for s in self._subscriptions.values())
            self._subscriptions[subscription.id] = subscription
        if first and self.on_access is not None:  # outside the lock: it may take others
            self.on_access(user, Sign.GRANT)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        with self._lock:
            gone = self._subscriptions.pop(subscription.id, None)
            last = gone is not None and all(
                s.user != gone.user for s in self._subscriptions.values()
            )
        if last and gone is not None and self.on_access is not None:
            self.on_access(gone.user, Sign.DENY)

    @property
    def subscriptions(self) -> tuple[Subscription, ...]:
        with self._lock:
            return tuple(self._subscriptions.values())

    def __call__(self, frame: DataFrame, batch_id: int) -> None:
        self.deliver_to(frame, batch_id, self.subscriptions)

    def replay(self, frame: DataFrame, batch_id: int, subscription: Subscription) -> None:
        """A stored batch again, to one subscriber resuming after an earlier batch: the
        same checks as live delivery, with her rights of now."""
        self.deliver_to(frame, batch_id, (subscription,))

    def deliver_to(
        self, frame: DataFrame, batch_id: int, subscriptions: tuple[Subscription, ...]
    ) -> None:
        """One batch to ``subscriptions``, each getting what SecFilter lets her have."""
        if not subscriptions:
            return
        arrived = time.monotonic()
        if len(self._memos) > _MEMO_LIMIT:
            self._memos.clear()
        memo = self._memos.setdefault(tuple(frame.columns), {})
        planned = self.plan(frame.columns, subscriptions, memo=memo)
        frame = _needed(frame)
        rows, counts = CollectedRows(), None
        wanted, metrics = planned.wanted, planned.metrics
        local = collect_on_driver(frame, planned.picks, planned.counted)
        if local is not None:  # a local frame: no job (engine/frames/driver_rows.py)
            rows, counts = local
        elif wanted is not None:  # one job: every class's rows and the drops
            rows, counts = collect_rows(
                frame, metrics, lambda f: f.filter(wanted).select(*planned.picks)
            )
        if metrics and counts is None:  # nobody may read, or the filter folded away
            counts = frame.agg(*metrics).collect()[0].asDict(recursive=False)
        self.finish(planned, rows, range(len(planned.live)), counts, batch_id, arrived)

    def plan(
        self,
        columns: list[str],
        subscriptions: tuple[Subscription, ...],
        col: Callable[[str], Column] = F.col,
        taken: Column | None = None,
        tag: str = "",
        memo: PlanMemo | None = None,
    ) -> Planned:
        """What one batch's delivery to ``subscriptions`` needs of its job, rights read
        now: a condition per class of equal (rights, roles, level), the struct each live
        class gets, and the drop counts. ``columns``: the output's columns; ``col``:
        where each is (the frame's own by default); ``taken``: which rows of that frame
        are this output's at all (None: every row), so that several outputs can be
        delivered by one job over one frame; ``tag`` keeps their names apart.

        ``memo``: class plans already built over this very layout (its owner's: the
        same ``columns``, ``col``, ``taken`` and ``tag``); building a class's columns
        costs a few hundred Py4J calls, and 64 outputs' classes rebuilt every batch cost
        more than the job that uses them. A class's plan is named after everything it
        depends on, so that equal classes of several outputs with equal rows are one
        column of one job."""
        aggregate_rows = self._aggregate and TUPLE_ORIGIN not in columns
        readable = self._readable(subscriptions, aggregate_rows)
        classes: dict[Key, list[Subscription]] = {}
        for subscription in subscriptions:
            key = (
                readable[subscription.user],
                self._mask(subscription),
                self._level(subscription),
            )
            classes.setdefault(key, []).append(subscription)
        memo = {} if memo is None else memo
        if len(memo) > _MEMO_LIMIT:
            memo.clear()
        own = self._own_mask()
        labels: list[OutputLabels] = []  # built only when a class is new

        def part(key: Key) -> ClassPlan:
            exempt = key[1] == own
            signature = (tuple(columns), key, exempt, aggregate_rows, self._on_drop is not None)
            if signature not in memo:
                if not labels:
                    labels.append(OutputLabels.of(columns, col))
                memo[signature] = _class_plan(columns, col, taken, tag, labels[0], signature)
            return memo[signature]

        parts = {key: part(key) for key in classes}
        live = [k for k in classes if not is_empty(k[0]) and not is_empty(k[1])]
        return Planned(classes, parts, live)

    def finish(
        self,
        planned: Planned,
        rows: CollectedRows,
        positions: Sequence[int],
        counts: dict[str, Any] | None,
        batch_id: int,
        arrived: float,
    ) -> None:
        """Hands each subscriber her class's rows (``positions``: where each live class's
        column is in ``rows``) and reports what each did not get."""
        for position, key in zip(positions, planned.live, strict=True):
            # One list for every subscriber with equal rows: a copy per subscriber made
            # the driver's memory grow with the number of subscribers times the batch (50
            # copies in the soak). Receivers must not mutate it; what they derive from it
            # (the SSE event's bytes) they make once for all of them (SharedRows.once).
            # This thread only hands it over: a receiver queues it and returns, so no
            # subscriber's socket holds it.
            mine = rows.dicts(position)
            for subscription in planned.classes[key]:
                self._hand_over(subscription, mine, batch_id)
                if mine and self.on_handover is not None:
                    self.on_handover(time.monotonic() - arrived)
        if counts:
            self._report_drops(batch_id, planned, counts)

    def _own_mask(self) -> Words | None:
        """The query's own mask now, or None (no recipient is exempt from the checks)."""
        if self.query_mask is None:
            return None
        try:
            mask = tuple(self.query_mask())
        except Exception as err:  # no exemption, the full checks still deliver
            audit.error("query roles lookup failed (%s)", type(err).__name__)
            return None
        return None if is_empty(mask) else mask

    def _level(self, subscription: Subscription) -> Words | None:
        """The subscriber's level words now; a failing lookup is a level that reads
        nothing (``()``), never "levels off"."""
        if self._levels is None:
            return _LEVELS_OFF
        words = _denying("level", self._levels, subscription)
        return None if words is None else tuple(words)

    def _mask(self, subscription: Subscription) -> Words:
        """The subscriber's READ mask now; a failing lookup is no role at all."""
        return tuple(_denying("roles", self._roles, subscription))

    def _readable(
        self, subscriptions: tuple[Subscription, ...], aggregate_rows: bool
    ) -> dict[str, Words]:
        """Each user's rights as words, looked up once per batch; failure is no right."""
        out: dict[str, Words] = {}
        for user in {s.user for s in subscriptions}:
            try:
                rights = Rights.of(self._rights(user))
            except Exception as err:  # any failure denies, never fails open
                audit.error(
                    "rights lookup for %s failed (%s): delivering nothing", user, type(err).__name__
                )
                rights = NO_RIGHTS
            out[user] = self._codec.readable(rights.sources(aggregate_rows))
        return out

    def _hand_over(self, subscription: Subscription, rows: list[dict], batch_id: int) -> None:
        if not rows:
            return
        try:
            if subscription.batched:
                subscription.deliver(rows, batch_id)
            else:
                subscription.deliver(rows)
        except Exception as err:  # one subscriber must not stop the others
            audit.error("delivery to %s failed (%s)", subscription.user, type(err).__name__)

    def _report_drops(self, batch_id: int, planned: Planned, counts: dict[str, Any]) -> None:
        """Rows each subscriber did not get, and the policy ids of those rows."""
        assert self._on_drop is not None
        for key, subscriptions in planned.classes.items():
            count, policies = planned.parts[key].drops
            dropped = int(counts[count] or 0)
            if not dropped:
                continue
            ids = tuple(sorted(p for p in counts[policies] or () if p))
            for subscription in subscriptions:
                try:
                    self._on_drop(subscription.user, batch_id, dropped, ids)
                except Exception as err:  # auditing must not stop delivery
                    audit.error("drop hook failed (%s)", type(err).__name__)


@dataclass(frozen=True)
class Together:
    """Several outputs' deliveries as the columns of one job (:meth:`of`): a column
    per distinct class plan (equal classes of outputs with equal rows share theirs, and
    their subscribers one list of rows), and every output's drops."""

    parts: Sequence[tuple[Delivery, Planned]]
    picks: dict[str, ClassPlan]
    observed: list[Column]
    """The drop counts as aggregates (observed while a job collects the picks)."""
    counted: list[Drops]
    """The drop counts as per-row flags (summed on the driver over collected rows)."""

    @classmethod
    def of(cls, parts: Sequence[tuple[Delivery, Planned]]) -> Together:
        picks: dict[str, ClassPlan] = {}
        metrics: dict[str, ClassPlan] = {}
        for _, planned in parts:
            for key in planned.live:
                picks.setdefault(planned.parts[key].name, planned.parts[key])
            for plan in planned.parts.values():
                if plan.metrics:
                    metrics.setdefault(plan.drops[0], plan)
        observed = [m for plan in metrics.values() for m in plan.metrics]
        counted = [plan.counted for plan in metrics.values() if plan.counted is not None]
        return cls(parts, picks, observed, counted)

    @property
    def columns(self) -> list[Column]:
        """Each class's pick, then each drop count's flags: what
        :func:`~streamshield.engine.delivery.collected_rows.picked_rows` reads back."""
        return [plan.pick for plan in self.picks.values()] + drop_flags(self.counted)

    def finish(
        self,
        rows: CollectedRows,
        counts: dict[str, Any] | None,
        batch_id: int,
        arrived: float,
    ) -> None:
        """Every output's subscribers handed their rows (the job is done: nothing here
        may fail the other outputs)."""
        where = {name: i for i, name in enumerate(self.picks)}
        for delivery, planned in self.parts:
            positions = [where[planned.parts[key].name] for key in planned.live]
            try:
                delivery.finish(planned, rows, positions, counts, batch_id, arrived)
            except Exception as err:
                audit.error("handing over one output's rows failed (%s)", type(err).__name__)


def deliver_together(
    frame: DataFrame,
    parts: Sequence[tuple[Delivery, Planned]],
    batch_id: int,
    arrived: float,
) -> None:
    """Several outputs' deliveries in one Spark job over one frame (each planned over it
    with its own ``col`` and ``taken``: :meth:`Delivery.plan`): a row some class of some
    output may have is collected once, with one column per distinct class plan
    (:class:`Together`), and every output's drops are counted by the same job. Each
    subscriber still gets only what her own output's checks let through: her class's
    column is NULL on every other row."""
    together = Together.of(parts)
    picks = together.picks
    rows, counts = CollectedRows(), None
    local = collect_on_driver(frame, [plan.pick for plan in picks.values()], together.counted)
    if local is not None:  # a local frame: no job (engine/frames/driver_rows.py)
        rows, counts = local
    elif picks:
        some = reduce(operator.or_, (plan.condition for plan in picks.values()))
        columns = [plan.pick for plan in picks.values()]
        rows, counts = collect_rows(
            frame, together.observed, lambda f: f.filter(some).select(*columns)
        )
    if together.observed and counts is None:  # nobody may read, or the filter folded away
        counts = frame.agg(*together.observed).collect()[0].asDict(recursive=False)
    together.finish(rows, counts, batch_id, arrived)


def _class_plan(
    columns: list[str],
    col: Callable[[str], Column],
    taken: Column | None,
    tag: str,
    labels: OutputLabels,
    signature: tuple,
) -> ClassPlan:
    """One class's condition, struct and drop metrics over ``columns`` (named by a
    digest of ``signature``: what they depend on besides the layout)."""
    _, key, exempt, _, drops = signature
    check = (
        delivered(columns, key[0], col)
        & (F.lit(True) if exempt else labels.row_visible(key[1]))
        & recipient_level(columns, key[2], col)
    )
    digest = hashlib.sha256(repr(signature).encode()).hexdigest()[:16]
    name = f"_ss_{tag}to{digest}"
    condition = check if taken is None else taken & check
    payload = labels.unchecked() if exempt else labels.payload(key[1])
    pick = F.when(condition, F.struct(*payload)).alias(name)
    names = (f"_ss_{tag}d{digest}", f"_ss_{tag}p{digest}")
    if not drops:
        return ClassPlan(condition, pick, name, (), names)
    missed = ~check if taken is None else taken & ~check
    policy = col(POLICY_COLUMN) if POLICY_COLUMN in columns else F.lit(None)
    dropped = F.when(missed, policy.cast("string"))
    metrics = (
        F.count_if(missed).alias(names[0]),
        F.collect_set(dropped).alias(names[1]),
    )
    counted = (*names, missed.alias(names[0]), dropped.alias(names[1]))
    return ClassPlan(condition, pick, name, metrics, names, counted)


def _denying(what: str, lookup: Callable[[Subscription], Any], subscription: Subscription) -> Any:
    """``lookup(subscription)``, or ``()`` (which lets nothing through) when it fails:
    any failure denies, never fails open; audited without values."""
    try:
        return lookup(subscription)
    except Exception as err:
        audit.error(
            "%s lookup for %s failed (%s): delivering nothing",
            what,
            subscription.user,
            type(err).__name__,
        )
        return ()


def recipient_level(
    columns: list[str], level: Words | None, col: Callable[[str], Column] = F.col
) -> Column:
    """Rows whose level words the recipient's level ``level`` dominates (None: levels
    are off, no test). Words of another width than hers, or none, deliver nothing."""
    if level is None:
        return F.lit(True)
    words = level_columns(columns)
    if not level or len(words) != len(level):
        return F.lit(False)
    return dominated_words([col(w) for w in words], level)


def _needed(frame: DataFrame) -> DataFrame:
    """Payload, provenance, policy id and the labels the recipients are checked against:
    the other label and origin columns (a salted hash of the channel, say) are never
    sent, so Spark need not compute them per row."""
    keep = set(provenance_columns(frame.columns)) | {POLICY_COLUMN, MASKED}

    def checked(column: str) -> bool:
        prefixes = ("_ss_r0_", "_ss_d0_", LEVEL_PREFIX)
        return column.startswith(prefixes) or slot_of(column) is not None

    return frame.drop(
        *(
            c
            for c in frame.columns
            if c.startswith(LABEL_PREFIX) and c not in keep and not checked(c)
        )
    )
