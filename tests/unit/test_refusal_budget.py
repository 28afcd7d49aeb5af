"""The audit budget per client address of refusals anyone can cause (catalog/refusal_budget.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streamshield.catalog.refusal_budget import RefusalBudget


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_flood_from_one_address_is_audited_a_bounded_number_of_times() -> None:
    clock = Clock()
    budget = RefusalBudget(per_window=3, window_seconds=60, clock=clock)
    taken = [budget.take("10.0.0.9") for _ in range(10)]
    assert taken == [0, 0, 0] + [None] * 7
    assert budget.take("10.0.0.8") == 0  # another address has its own budget
    clock.now = 60.0
    assert budget.take("10.0.0.9") == 7  # the next window's first entry counts the rest
    assert budget.take("10.0.0.9") == 0


@given(st.lists(st.floats(0, 600, allow_nan=False), max_size=200))
def test_nothing_refused_goes_uncounted(times: list[float]) -> None:
    """Every refusal is written or counted in a later entry (or still pending); and
    no window writes more than its budget."""
    clock = Clock()
    budget = RefusalBudget(per_window=4, window_seconds=60, clock=clock)
    written, counted, per_window = 0, 0, {}
    for at in sorted(times):
        clock.now = at
        taken = budget.take("a")
        if taken is not None:
            written += 1
            counted += taken
            started = budget._windows["a"].started
            per_window[started] = per_window.get(started, 0) + 1
    pending = budget._windows["a"].suppressed if times else 0
    assert written + counted + pending == len(times)
    assert all(n <= 4 for n in per_window.values())
