"""A sliding-window aggregate's fold (lang/sliding_fold.py): its window's start and end
as state keys, the window rebuilt from them, the newest event time where a watermark
is kept, and what does not fold."""

from __future__ import annotations

import pytest
import sqlglot

from streamshield.lang.sliding_fold import LATEST, sliding_fold

WINDOW = "`window`(t, '2 minutes', '1 minute')"
SECURED = (
    f"SELECT {WINDOW} AS `window`, ward, count(*) AS n, avg(hr) AS a, "
    f"bit_and(_ss_r0_0) AS _ss_r0_0 FROM v WHERE hr > 3 GROUP BY ward, {WINDOW} "
    "HAVING count(*) > 1"
)


def test_the_window_is_two_keys_and_is_rebuilt_as_sparks_struct() -> None:
    folded = sliding_fold(sqlglot.parse_one(SECURED, read="spark"), "t", watermark=True)
    assert folded is not None
    fold = folded.fold
    assert fold.keys == ("_ss_k0", "_ss_k1", "_ss_k2")
    assert (folded.start, folded.end, folded.latest) == ("_ss_k1", "_ss_k2", LATEST)
    assert fold.final[0] == "STRUCT(_ss_k1 AS start, _ss_k2 AS end)"
    assert ".start AS _ss_k1" in fold.partial and ".end AS _ss_k2" in fold.partial
    assert "MAX(t) AS _ss_latest" in fold.partial and (LATEST, "max") in fold.merges
    assert fold.having == "_ss_p0 > 1"


def test_without_a_watermark_no_event_time_is_kept() -> None:
    folded = sliding_fold(sqlglot.parse_one(SECURED, read="spark"), "t", watermark=False)
    assert folded is not None and folded.latest is None
    assert LATEST not in folded.fold.partial


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT ward, count(*) AS n FROM v GROUP BY ward",  # no window
        f"SELECT {WINDOW} AS `window`, count(DISTINCT ward) AS n FROM v GROUP BY {WINDOW}",
        f"SELECT {WINDOW} AS `window`, stddev(hr) AS s FROM v GROUP BY {WINDOW}",
        # the watermark would grow with rows the WHERE drops
        f"SELECT {WINDOW} AS `window`, count(*) AS n FROM v WHERE t > 5 GROUP BY {WINDOW}",
        # two windows: not one sliding window's keys
        f"SELECT count(*) AS n FROM v GROUP BY {WINDOW}, `window`(t, '1 minute')",
    ],
)
def test_what_does_not_fold(sql: str) -> None:
    assert sliding_fold(sqlglot.parse_one(sql, read="spark"), "t", watermark=True) is None
