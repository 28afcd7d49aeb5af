"""A driven query's progress report (engine/queries/driven_handle.py, ``progress_of``): what the
server, /metrics, the backlog and the benches read of a Spark streaming query's."""

from __future__ import annotations

from streamshield.engine.queries.driven_handle import progress_of


def test_stages_rates_and_the_trigger_time_as_a_streaming_query_reports_them() -> None:
    ends = {"latestOffset": 10.01, "queryPlanning": 10.03, "addBatch": 10.43, "commitOffsets": 10.5}
    report = progress_of(7, 1000, previous=8.0, began=10.0, ends=ends)
    assert report["batchId"] == 7 and report["numInputRows"] == 1000
    assert report["durationMs"] == {
        "latestOffset": 10,
        "queryPlanning": 20,
        "addBatch": 400,
        "commitOffsets": 70,
        "triggerExecution": 500,
    }
    assert report["inputRowsPerSecond"] == 500.0  # since the previous micro-batch began
    assert report["processedRowsPerSecond"] == 2000.0  # over its own 0.5 s


def test_the_first_micro_batch_has_no_input_rate_and_an_empty_one_no_division() -> None:
    first = progress_of(0, 5, previous=None, began=1.0, ends={"addBatch": 1.0})
    assert first["inputRowsPerSecond"] == 0.0 and first["processedRowsPerSecond"] == 0.0
