"""Threat: reading a value through an error message, or through whether a query fails.

Spark's runtime errors quote the offending value (``[CAST_INVALID_INPUT] The value
'150.0x' ...``). The class: any path from such a message to a user who may not read the
value, and any failure whose occurrence depends on a value she may not read (a division
by a hidden zero would be a one-bit oracle). Checks: masks sit below every user
expression, so a hidden value never reaches an expression that could fail on it; a
failure shows its owner the error class only (``safe_error``), the full text goes to the
audit under ``admin_only`` (tests/server/test_query_lifecycle.py reads it over HTTP).
"""

from __future__ import annotations

import pytest

from streamshield.engine.queries.streaming_queries import QueryFailed, safe_error
from tests.security.ward import MASKED_RATES

pytestmark = pytest.mark.spark

# Fails on 150.0x (a cast of a readable value) and on 904's 0 (a division by zero).
FAILING = (
    "SELECT patient_id, CAST(concat(CAST(beats_per_min AS STRING), 'x') AS INT) AS v, "
    "1 DIV CAST(beats_per_min AS INT) AS w FROM HeartRate WHERE patient_id > 900"
)
VALUES = ("150", "71.0", "120.0", "130.0", "0.0x")


def test_a_failure_on_a_readable_value_names_its_class_and_no_value(labelled_ward) -> None:
    with pytest.raises(QueryFailed) as failed:
        labelled_ward.rows(FAILING, ["C"])
    message = str(failed.value)
    assert not any(value in message for value in VALUES), message
    assert "_ERROR" in message or "INPUT" in message or "ZERO" in message, message


def test_a_hidden_value_cannot_make_a_query_fail(labelled_ward) -> None:
    rows = labelled_ward.rows(FAILING, ["ND"])  # the same query, over masked rates: no failure
    assert {r["patient_id"] for r in rows} == set(MASKED_RATES)
    assert all(r["v"] is None and r["w"] is None for r in rows)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            "[STREAM_FAILED] Query [id = 1f, runId = 2e] terminated with exception: "
            "[CAST_INVALID_INPUT] The value '[SECRET_902]' of the type \"STRING\" cannot "
            'be cast to "INT"',
            "CAST_INVALID_INPUT",
        ),
        ("java.lang.ArithmeticException: 150.0 / 0 for patient 902", "Exception"),
        ("[DIVIDE_BY_ZERO] Division by zero. [902] [150.0]", "DIVIDE_BY_ZERO"),
    ],
)
def test_the_owner_sees_the_class_never_the_text(message: str, expected: str) -> None:
    shown = safe_error(Exception(message))
    assert shown == expected
    assert "902" not in shown and "150" not in shown


def test_a_bracketed_value_is_not_taken_for_an_error_class() -> None:
    message = (
        "[STREAM_FAILED] Query [id = 1f, runId = 2e] terminated with exception: Job "
        "aborted due to stage failure: java.lang.IllegalStateException: unexpected key [902]"
    )
    assert "902" not in safe_error(Exception(message))
