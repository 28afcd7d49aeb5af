"""Privacy switches of a shared join (network/join_switches.py): PrS Algorithm 2 over
``left, right -> join -> branch per query``."""

from __future__ import annotations

from streamshield.network.join_switches import join_switches
from streamshield.network.switch_state import AccessChange, SwitchState
from streamshield.network.switches import SwitchKind
from streamshield.policy.punctuation import Sign

NODE = "HeartRate h [ROWS 100] JOIN BodyTemperature b [ROWS 100] ON h.pid = b.pid"


def test_a_join_has_an_initial_switch_per_input_and_a_terminal_one_per_query() -> None:
    switches = join_switches(("HeartRate", "BodyTemperature"), NODE, ["cardio", "gp"])
    both = frozenset({"cardio", "gp"})
    kinds = sorted((s.kind.value, sorted(s.queries), _spelled(s.producer)) for s in switches)
    assert kinds == [
        ("in-network", ["cardio"], "join"),
        ("in-network", ["gp"], "join"),
        ("initial", sorted(both), "BodyTemperature"),
        ("initial", sorted(both), "HeartRate"),
        ("terminal", ["cardio"], "branch"),
        ("terminal", ["gp"], "branch"),
    ]
    assert len({s.id for s in switches}) == len(switches)
    # Independent of the order queries came in; none without queries.
    assert join_switches(("HeartRate", "BodyTemperature"), NODE, ["gp", "cardio"]) == switches
    assert join_switches(("HeartRate", "BodyTemperature"), NODE, []) == ()


def _spelled(producer) -> str:
    """A stream by its name, a vertex by its kind (join, branch)."""
    return producer if isinstance(producer, str) else producer.kind


def test_one_query_has_no_in_network_switch_and_a_self_join_one_input() -> None:
    alone = join_switches(("HeartRate", "BodyTemperature"), NODE, ["cardio"])
    assert sorted(s.kind.value for s in alone) == ["initial", "initial", "terminal"]
    self_join = join_switches(("HeartRate", "HeartRate"), "h JOIN h2", ["cardio"])
    assert sorted(s.kind.value for s in self_join) == ["initial", "terminal"]


def test_two_joins_of_the_same_streams_have_different_switch_ids() -> None:
    streams = ("HeartRate", "BodyTemperature")
    one = {s.id for s in join_switches(streams, NODE, ["q"])}
    other = {s.id for s in join_switches(streams, NODE.replace("100", "5"), ["q"])}
    assert not one & other


def test_the_inputs_stay_open_while_any_query_is_received() -> None:
    """Deny by default; one receiver of one query opens both inputs and that query's
    edges only; her revoke closes everything again."""
    switches = join_switches(("HeartRate", "BodyTemperature"), NODE, ["cardio", "gp"])
    state, dropped = SwitchState.restore(switches, {})
    assert not dropped and not any(state.is_open(s) for s in switches)
    state, _ = SwitchState.restore(switches, {"cardio": ["ann"]})
    opened = {(s.kind, s.queries) for s in switches if state.is_open(s)}
    assert opened == {
        (SwitchKind.INITIAL, frozenset({"cardio", "gp"})),
        (SwitchKind.IN_NETWORK, frozenset({"cardio"})),
        (SwitchKind.TERMINAL, frozenset({"cardio"})),
    }
    initial = [s for s in switches if s.kind is SwitchKind.INITIAL]
    state, _ = state.apply(AccessChange("gp", "bob", Sign.GRANT))
    assert [state.counters[s] for s in initial] == [2, 2], "ann and bob read the inputs"
    state, _ = state.apply(AccessChange("cardio", "ann", Sign.DENY))
    state, _ = state.apply(AccessChange("gp", "bob", Sign.DENY))
    assert not any(state.is_open(s) for s in switches)
