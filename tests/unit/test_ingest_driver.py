"""The ingest driver's per-batch shortcuts keep every decision (engine/ingest/ingest, gc_pause).

Policies are compiled once per distinct body (content id) across batches, and recompiled
whenever what the rules depend on changes; the collector pause always ends.
"""

from __future__ import annotations

import gc

import pytest

from streamshield.catalog.streams import StreamDefinition
from streamshield.engine.gc_pause import gc_paused
from streamshield.engine.ingest import ingest as ingest_module
from streamshield.engine.ingest.ingest import Ingest
from streamshield.policy.policy import Policy, ServerPolicy
from streamshield.policy.punctuation import (
    DataDescription,
    SecurityPunctuation,
    SecurityRestriction,
)
from streamshield.policy.roles import RoleHierarchy
from streamshield.policy.sp_patterns import ANY, Literal

STREAM = StreamDefinition("S", (("id", "bigint"), ("v", "double"), ("ts", "bigint")), "id", "ts")


def policy(role: str, ts: int) -> Policy:
    sp = SecurityPunctuation(
        DataDescription(ANY, ANY, ANY), SecurityRestriction(Literal(role)), ts=ts
    )
    return Policy.of([sp])


@pytest.fixture
def compiled(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records each real compilation (the policy id)."""
    calls: list[str] = []
    real = ingest_module.compile_rules

    def counting(policy, *args, **kwargs):
        calls.append(policy.policy_id)
        return real(policy, *args, **kwargs)

    monkeypatch.setattr(ingest_module, "compile_rules", counting)
    return calls


def test_a_body_is_compiled_once_across_batches_and_ts(compiled: list[str]) -> None:
    ingest = Ingest(None, RoleHierarchy.build(["a", "b"]), {"S": STREAM})  # type: ignore[arg-type]
    first: dict = {}
    assert ingest._compile("S", policy("a", 1), first) == policy("a", 1).policy_id
    second: dict = {}  # the next batch, the same body re-sent with a new ts
    ingest._compile("S", policy("a", 7), second)
    assert compiled == [policy("a", 1).policy_id]
    assert first == second
    assert policy("a", 7).policy_id in ingest._in_force  # still recorded in the registry


def test_what_the_rules_depend_on_recompiles(compiled: list[str]) -> None:
    ingest = Ingest(None, RoleHierarchy.build(["a"]), {"S": STREAM})  # type: ignore[arg-type]
    assert ingest._compile("S", policy("b", 1), {}) is None  # unknown role: unusable
    ingest.use_hierarchy(RoleHierarchy.build(["a", "b"]))  # b created: now usable
    assert ingest._compile("S", policy("b", 2), {}) == policy("b", 2).policy_id
    before = {}
    ingest._compile("S", policy("a", 3), before)
    only_b = SecurityPunctuation(
        DataDescription(ANY, ANY, ANY), SecurityRestriction(Literal("b")), ts=1
    )
    ingest.use_server_policies({"S": ServerPolicy((only_b,))})  # intersected: a no longer reads
    with pytest.raises(TypeError):  # never changed in place, unseen by the compiled cache
        ingest.server["S"] = ServerPolicy()  # type: ignore[index]
    after = {}
    ingest._compile("S", policy("a", 4), after)
    assert len(compiled) == 4  # b (refused), b, a, a under the server policy
    assert before != after


def test_the_collector_pause_nests_and_always_ends() -> None:
    assert gc.isenabled()
    with pytest.raises(RuntimeError), gc_paused():
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer holder still works
        raise RuntimeError("a failing batch")
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # left as it was found
    finally:
        gc.enable()
