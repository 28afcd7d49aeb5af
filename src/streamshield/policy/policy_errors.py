"""Why a policy cannot be used: its tuples are then denied (deny by default).

Apart from :mod:`streamshield.policy.policy` so that patterns, which policies are built
from, can raise it too (an unresolved tag pattern,
:class:`~streamshield.policy.sp_patterns.Tagged`).
"""

from __future__ import annotations


class PolicyError(ValueError):
    """A policy that cannot be used (unknown role, conflicting sps): its tuples are denied."""


class UnresolvedTags(PolicyError):
    """A tag pattern asked to match before the stream's tags were resolved into names:
    never guessed either way, the policy is unusable."""
