"""Server policies that address classification tags, resolved into named policies.

A server policy's attribute part may say ``TAGGED PHI`` (:class:`~streamshield.policy.
sp_patterns.Tagged`) instead of names. Which attributes carry a tag is the stream
definition's to say at the time of labelling, so before a policy decides anything its
tag patterns become the set of attribute names carrying the tags *now*
(:func:`resolve_tags`); everything downstream (``label_for``, the compiled rules of the
Spark engine, the INTERSECT/UNION combination with provider sps) sees only the named
policy it would have seen had the administrator listed those attributes. A tag no
attribute carries covers no attribute: its sp speaks about nothing and is left out.

Server policies are stored per *scope*: a stream name, or a stream-name glob (``ward*``,
``*``) so that one policy also covers streams created after it (:func:`server_policy_for`
gathers every policy whose scope takes in the stream). All policies for one stream must
agree on their mode: two modes would leave the combination undefined, so the stream's
tuples are then denied (PolicyError), never labelled under either mode alone.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace

from streamshield.policy.policy import PolicyError, ServerPolicy
from streamshield.policy.punctuation import SecurityPunctuation
from streamshield.policy.sp_patterns import ANY, Glob, Tagged, one_of


def is_scope_pattern(scope: str) -> bool:
    """Whether a server policy's scope is a stream-name glob rather than one stream."""
    return "*" in scope or "?" in scope


def scope_takes_in(scope: str, stream: str) -> bool:
    """Whether a policy stored under ``scope`` applies to ``stream``."""
    if not is_scope_pattern(scope):
        return scope == stream
    return (ANY if scope == "*" else Glob(scope)).matches(stream)


def resolve_tags(
    sps: Iterable[SecurityPunctuation],
    attributes: Sequence[str],
    tags_of: Mapping[str, Collection[str]],
) -> tuple[SecurityPunctuation, ...]:
    """``sps`` with every ``TAGGED`` attribute pattern replaced by the names of the
    ``attributes`` that carry one of its tags now (``NOT TAGGED``: none of them;
    ``tags_of``: attribute to tags, stored form); an sp that so names no attribute is
    left out (it covers nothing)."""
    resolved = []
    for sp in sps:
        pattern = sp.ddp.attributes
        if isinstance(pattern, Tagged):
            names = [a for a in attributes if pattern.takes_in(frozenset(tags_of.get(a, ())))]
            if not names:
                continue
            sp = replace(sp, ddp=replace(sp.ddp, attributes=one_of(names)))
        resolved.append(sp)
    return tuple(resolved)


def server_policy_for(
    policies: Mapping[str, ServerPolicy],
    stream: str,
    attributes: Sequence[str],
    tags_of: Mapping[str, Collection[str]],
) -> ServerPolicy | None:
    """The server policy in force for ``stream`` as its definition stands: every policy
    whose scope takes in the stream (its own, then globs, in scope order), tags resolved.

    None when no policy applies or every sp resolved to nothing. PolicyError when the
    policies that apply disagree on their mode (the caller denies the stream's tuples).
    """
    applying = [p for scope, p in sorted(policies.items()) if scope_takes_in(scope, stream)]
    if not applying:
        return None
    modes = {p.mode for p in applying}
    if len(modes) > 1:
        raise PolicyError(f"server policies of both modes apply to stream {stream}")
    sps = resolve_tags((sp for p in applying for sp in p.sps), attributes, tags_of)
    return ServerPolicy(sps, modes.pop()) if sps else None
