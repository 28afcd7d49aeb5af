"""Settings for the whole suite.

Hypothesis' per-example deadline measures the machine's load as much as the code: on
2 shared cores a pure check can take 10x its usual time. Examples stay bounded by
``max_examples``; the deadline is off so that load never fails a correct test.

Long mode: a test marked ``long`` repeats, at a larger size, what a shorter test of the
suite already checks (every crash point instead of two, a path that is off by default
through every hostile input). The suite must stay well under 30 minutes on 2 cores, so
these run only with ``STREAMSHIELD_LONG_TESTS=1`` (README, "Long modes"), as the nightly
fuzz and soak do.
"""

import os

import pytest
from hypothesis import settings

settings.register_profile("streamshield", deadline=None)
settings.load_profile("streamshield")

LONG = "STREAMSHIELD_LONG_TESTS"


def long_mode() -> bool:
    """Whether the long tests run (``STREAMSHIELD_LONG_TESTS=1``)."""
    return os.environ.get(LONG, "") not in ("", "0")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if long_mode():
        return
    skip = pytest.mark.skip(reason=f"long mode only: set {LONG}=1 (README, 'Long modes')")
    for item in items:
        if item.get_closest_marker("long") is not None:
            item.add_marker(skip)
