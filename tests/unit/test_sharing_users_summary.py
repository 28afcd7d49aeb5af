"""``bench.sharing_users``: figures per arm and mode, each against its own one user."""

from __future__ import annotations

from bench import sharing_users
from bench.sharing_users import Case, DeliveryClock, Inbox


def batch(span: float, delivery: float = 0.0, rows: int = 0) -> dict:
    return {
        "span_s": span,
        "wall_s": span,
        "delivery_s": delivery,
        "plan_s": delivery / 4,
        "collect_s": delivery / 2,
        "rows_delivered": rows,
    }


def case(n: int, arm: str, nobody: float, listening: float) -> Case:
    out = Case(n, 0, arm, register_s=0.1 * n)
    out.batches = {
        "nobody": [batch(nobody), batch(nobody)],
        "listening": [batch(listening, 0.5, 100 * n), batch(listening, 0.5, 100 * n)],
    }
    return out


def test_each_arm_and_mode_is_its_own_ratio_to_one_user() -> None:
    cases = [
        case(1, "fused", 0.4, 0.5),
        case(4, "fused", 0.6, 1.5),
        case(1, "separate", 0.3, 0.4),
        case(4, "separate", 1.2, 2.0),
    ]
    summary = sharing_users.summarise(cases, [1, 4])
    assert summary["fused/nobody"][4]["span_ratio"] == 1.5
    assert summary["fused/listening"][4]["span_ratio"] == 3.0
    assert summary["separate/nobody"][4]["span_ratio"] == 4.0
    assert summary["separate/listening"][4]["rows_delivered"]["median"] == 400
    result = {
        "sizes": [1, 4],
        "summary": summary,
        "date": "d",
        "load_before": 1.0,
        "load_after": 2.0,
        "run_s": 3.0,
        "rows": 20_000,
        "reps": 2,
        "batches": 2,
    }
    text = sharing_users.markdown(result, "python -m bench.sharing_users")
    assert text.startswith(sharing_users.HEADING)
    assert "| 4 | 0.6 [0.6-0.6] **1.5x** | 1.5 [1.5-1.5] **3.0x** | - | 1.2 [1.2-1.2]" in text
    assert (
        "| 4 | 0.5 (0.125 / 0.25 / 0.125) | - | 0.5 (0.125 / 0.25 / 0.125) | 400 | 0.4 / 0.4 |"
        in text
    )


def test_the_inbox_is_bounded_and_the_clock_resets() -> None:
    inbox = Inbox()
    for b in range(sharing_users.INBOX_BATCHES + 10):
        inbox([{"x": 1}, {"x": 2}], b)
    assert len(inbox.batches) == sharing_users.INBOX_BATCHES and inbox.rows == 2 * (b + 1)
    clock = DeliveryClock()
    clock.add(0.5)
    clock.add(0.25)
    clock.add_collect(0.125, 0.5)
    assert clock.take() == (0.75, 2, 0.125, 0.5) and clock.take() == (0.0, 0, 0.0, 0.0)


def test_a_bench_command_names_only_the_flags_that_changed() -> None:
    from bench.experiment_common import changed_flags

    flags = [("--rows", 20_000, 20_000), ("--reps", 3, 2), ("--seed", 12, 12)]
    assert changed_flags(flags) == " --reps 3"
    assert changed_flags([]) == ""
