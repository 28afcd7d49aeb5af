"""The soak's verdict after warm-up (bench/soak.py): when warm-up ends, and a trend
fitted over what follows, so a curve still climbing is not called flat."""

from __future__ import annotations

from bench.soak import after_warm_up, warm_up_end


def _samples(values: list[float], every: float = 10.0, rows_from: float = 0.0) -> list[dict]:
    return [
        {"t": i * every, "rss_mb": v, "rows": int(i * every >= rows_from)}
        for i, v in enumerate(values)
    ]


def test_warm_up_ends_when_told_or_at_first_rows_or_a_third() -> None:
    samples = _samples([1.0] * 60, rows_from=400)
    assert warm_up_end(samples, 600, told=120) == 120
    assert warm_up_end(samples, 600) == 400  # rows came after a third of the run
    assert warm_up_end(_samples([1.0] * 60, rows_from=50), 600) == 200
    assert warm_up_end(_samples([1.0] * 60, rows_from=10**9), 600) == 600  # never


def test_a_climb_after_warm_up_is_not_flat_and_a_plateau_is() -> None:
    climbing = _samples([1000 + 10 * i for i in range(60)])  # +60 MB a minute
    trend = after_warm_up(climbing, "rss_mb", 200)
    assert trend["flat"] is False and trend["slope_per_minute"] == 60.0
    plateau = _samples([1000 + 200 * min(i, 20) + (i % 2) * 5 for i in range(60)])
    trend = after_warm_up(plateau, "rss_mb", 200)  # the step is before the end of warm-up
    assert trend["flat"] is True and abs(trend["fitted_change"]) < 10


def test_too_little_after_warm_up_has_no_verdict() -> None:
    assert after_warm_up(_samples([1.0] * 60), "rss_mb", 550)["flat"] is None
    assert after_warm_up(_samples([1.0] * 60), "threads", 0)["flat"] is None  # no such key


def test_a_restarts_steps_are_read_from_the_servers_line() -> None:
    from bench.restart_profile import steps

    line = (
        "ready after 12.3s (python start and imports 1.2s, catalog, TLS, imports, example "
        "users 0.5s, spark start 8.0s, api 0.1s, ingest 1.0s, queries 2.0s, patterns 0.0s)"
    )
    [found] = steps(f"starting\n{line}\n")
    assert found["ready_after"] == 12.3
    assert found["steps"]["catalog, TLS, imports, example users"] == 0.5
    assert round(sum(found["steps"].values()), 1) == 12.8
