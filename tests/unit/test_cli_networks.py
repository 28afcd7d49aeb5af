"""The CLI's network table: one row per switch, with the level its queries run at."""

from streamshield.cli.networks import switch_rows


def _switch(kind: str, queries: list[str]) -> dict:
    return {"kind": kind, "queries": queries, "open": True, "counter": 1, "users": []}


def test_each_switch_shows_the_level_of_its_queries() -> None:
    answer = {
        "networks": [
            {
                "stream": "MessageLog",
                "queries": ["q1", "q2"],
                "levels": {"q1": "[1, ⊥]", "q2": "[1, ⊥]"},
                "switches": [_switch("initial", ["q1", "q2"]), _switch("terminal", ["q2"])],
            },
            {
                "stream": "MessageLog",
                "queries": ["q3"],
                "levels": {"q3": "[⊥, B]"},
                "switches": [_switch("terminal", ["q3"])],
            },
        ]
    }
    rows = switch_rows(answer)
    assert [(r["stream"], r["kind"], r["level"], r["queries"]) for r in rows] == [
        ("MessageLog", "initial", "[1, ⊥]", "q1,q2"),
        ("MessageLog", "terminal", "[1, ⊥]", "q2"),
        ("MessageLog", "terminal", "[⊥, B]", "q3"),
    ]


def test_levels_off_show_a_dash() -> None:
    answer = {
        "networks": [
            {"stream": "vitals", "queries": ["a"], "levels": {"a": None}, "switches": []},
            {"stream": "vitals", "queries": ["b"], "switches": [_switch("terminal", ["b"])]},
        ]
    }
    assert [r["level"] for r in switch_rows(answer)] == ["-"]


def test_a_window_network_says_so_in_its_stream_column() -> None:
    answer = {
        "networks": [
            {"stream": "vitals", "kind": "selections", "queries": ["a"], "switches": []},
            {
                "stream": "vitals",
                "kind": "windows",
                "queries": ["w"],
                "switches": [_switch("initial", ["w"]), _switch("terminal", ["w"])],
            },
        ]
    }
    rows = switch_rows(answer)
    assert [(r["stream"], r["kind"]) for r in rows] == [
        ("vitals windows", "initial"),
        ("vitals windows", "terminal"),
    ]


def test_a_shared_join_names_both_streams() -> None:
    answer = {
        "networks": [
            {
                "stream": "vitals JOIN rooms",
                "kind": "joins",
                "queries": ["pairs"],
                "switches": [_switch("initial", ["pairs"]), _switch("terminal", ["pairs"])],
            },
        ]
    }
    assert [r["stream"] for r in switch_rows(answer)] == ["vitals JOIN rooms"] * 2
