"""A policy compiled for one stream into flat *rules*: the form the Spark engine evaluates.

``label_for`` decides one tuple at a time. The engine instead needs, per policy, a
fixed-shape table it can evaluate with native expressions on every tuple: a list of
rules, each a tuple-id pattern plus the bitset words it contributes when it matches.
Stream and attribute scopes are resolved here, once per policy, because the stream and
its attributes are known; only the tuple id varies per tuple.

The words of all label components sit in one flat list per rule (see :class:`Layout`);
a tuple's accumulated words are the OR of the matching rules' words, and
:func:`finish` turns them into reader/denied words with the combination formula of
``label_for``. :func:`evaluate` runs the same steps in Python; property tests prove it
equal to ``label_for``, and the Spark engine runs the same steps as Catalyst expressions.
Words are privilege twins (:class:`~streamshield.policy.encoding.RoleCodec`), so the
fold and the combination formula are the same for READ, STATISTICS and GRANT: per bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from operator import or_

from streamshield.policy.bitset import Words
from streamshield.policy.encoding import EncodedAccess, EncodedLabel, RoleCodec
from streamshield.policy.policy import Combine, Policy, PolicyError, ServerPolicy, role_members
from streamshield.policy.privileges import granted_twins
from streamshield.policy.punctuation import SecurityPunctuation, Sign
from streamshield.policy.roles import UnknownRoleError
from streamshield.policy.sp_patterns import Pattern

# Parts accumulated per object (the tuple, then each attribute), in this order.
PARTS = ("mut", "imm", "deny", "srv", "srv_deny", "cover")
MUT, IMM, DENY, SRV, SRV_DENY, COVER = range(len(PARTS))


@dataclass(frozen=True)
class Layout:
    """Where each (object, part, word) lives in a rule's flat word list."""

    attributes: tuple[str, ...]
    width: int

    @property
    def objects(self) -> tuple[str | None, ...]:
        return (None, *self.attributes)  # None: the tuple itself

    @property
    def size(self) -> int:
        return len(self.objects) * len(PARTS) * self.width

    def offset(self, obj: int, part: int) -> int:
        return (obj * len(PARTS) + part) * self.width


@dataclass(frozen=True)
class Rule:
    """Contributes ``words`` to every tuple whose id ``tuples`` matches."""

    tuples: Pattern
    words: Words


@dataclass(frozen=True)
class RuleSet:
    layout: Layout
    rules: tuple[Rule, ...]
    mode: Combine
    policy_id: str


def compile_rules(
    policy: Policy,
    stream: str,
    attributes: Sequence[str],
    codec: RoleCodec,
    server: ServerPolicy | None = None,
) -> RuleSet:
    """The rules of ``policy`` (and the stream's server policy) for tuples of ``stream``.

    Raises PolicyError when an sp names an unknown role, as ``label_for`` does.
    """
    layout = Layout(tuple(attributes), codec.width)
    rules = [_rule(sp, stream, layout, codec, server_side=False) for sp in policy.sps]
    if server is not None:
        rules += [_rule(sp, stream, layout, codec, server_side=True) for sp in server.sps]
    mode = server.mode if server is not None else Combine.INTERSECT
    kept = tuple(rule for rule in rules if rule is not None and any(rule.words))
    return RuleSet(layout, kept, mode, policy.policy_id)


def _rule(
    sp: SecurityPunctuation, stream: str, layout: Layout, codec: RoleCodec, server_side: bool
) -> Rule | None:
    if not sp.ddp.streams.matches(stream):
        return None
    try:
        roles = role_members(sp.srp.roles, codec.hierarchy)
    except UnknownRoleError as err:
        raise PolicyError(str(err)) from err
    grant = sp.sign is Sign.GRANT
    readers = codec.hierarchy.readers(roles)
    # privilege twins: a grant sets the twins of its privilege, a deny every twin
    up = (
        codec.twins(readers, granted_twins(sp.srp.privilege, sp.srp.grant_option))
        if grant
        else codec.denied(readers)
    )
    words = [0] * layout.size
    ones = (-1,) * layout.width

    def put(obj: int, part: int, value: Words) -> None:
        start = layout.offset(obj, part)
        words[start : start + layout.width] = value

    matched = [sp.ddp.attributes.matches(a) for a in layout.attributes]
    for obj in range(len(layout.objects)):
        applies = (any(matched) if grant else all(matched)) if obj == 0 else matched[obj - 1]
        if not applies:
            continue
        if server_side:
            put(obj, SRV if grant else SRV_DENY, up)
            put(obj, COVER, ones)
        else:
            put(obj, (IMM if sp.immutable else MUT) if grant else DENY, up)
    return Rule(sp.ddp.tuples, tuple(words))


def accumulate(rules: RuleSet, tid: object) -> list[int]:
    """OR of the words of every rule whose tuple pattern matches ``tid``."""
    acc = [0] * rules.layout.size
    for rule in rules.rules:
        if rule.tuples.matches(tid):
            acc = list(map(or_, acc, rule.words))  # words are layout.size long
    return acc


def finish_word(parts: Sequence[int], mode: Combine) -> tuple[int, int]:
    """Readers and denied of one object for one word, from its accumulated parts."""
    mut, imm, deny, srv, srv_deny, cover = parts
    srv_ok = srv & ~srv_deny
    combined = (mut & srv_ok if mode is Combine.INTERSECT else mut | srv_ok) if cover else mut
    return combined | imm, deny


def label_words(rules: RuleSet, tid: object) -> list[int]:
    """:func:`evaluate` flattened in the order of the stored label columns: per object
    (the tuple, then each attribute) and word, its readers then its denied word.

    The engine stores these words for a policy whose rules ignore the tuple id, once per
    distinct policy on the driver: at one sp per tuple that is every tuple, so this
    skips the per-word lists and label objects of :func:`evaluate` (a property test
    holds the two equal)."""
    acc, layout = accumulate(rules, tid), rules.layout
    width, stride = layout.width, len(PARTS) * layout.width
    intersect = rules.mode is Combine.INTERSECT
    words: list[int] = []
    for start in range(0, len(acc), stride):
        for w in range(start, start + width):
            mut, imm, deny, srv, srv_deny, cover = acc[w : start + stride : width]
            srv_ok = srv & ~srv_deny
            combined = (mut & srv_ok if intersect else mut | srv_ok) if cover else mut
            words += (combined | imm, deny)
    return words


def evaluate(rules: RuleSet, tid: object) -> EncodedLabel:
    """The label of one tuple, computed the way the Spark engine computes it."""
    acc, layout = accumulate(rules, tid), rules.layout
    accesses = []
    for obj in range(len(layout.objects)):
        readers, denied = [], []
        for w in range(layout.width):
            parts = [acc[layout.offset(obj, p) + w] for p in range(len(PARTS))]
            r, d = finish_word(parts, rules.mode)
            readers.append(r)
            denied.append(d)
        accesses.append(EncodedAccess(tuple(readers), tuple(denied)))
    return EncodedLabel(
        accesses[0], dict(zip(layout.attributes, accesses[1:], strict=True)), rules.policy_id
    )
