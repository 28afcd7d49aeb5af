"""Which subscriptions of a shared join a batch computes (engine/queries/scjoin.py): switch on,
or owing the batch; an error asking a switch reads as off (deny by default)."""

from __future__ import annotations

from streamshield.engine.queries.scjoin import Subscription, due_subscriptions


class _Owing:
    """A sink that delivered batches ``owed`` before a crash stored them."""

    def __init__(self, *owed: int) -> None:
        self._owed = list(owed)

    def owed(self) -> list[int]:
        return self._owed


def _subscription(name: str, sink: object = None) -> Subscription:
    return Subscription(("C",), (1,), lambda _frame, _batch: None, name=name, sink=sink)


def _broken(name: str) -> bool:
    raise RuntimeError(f"no state for {name}")


def test_only_subscriptions_whose_switch_is_on_are_computed() -> None:
    subs = [_subscription("on"), _subscription("off"), _subscription("also_on")]
    due = due_subscriptions(subs, lambda name: name != "off", 4)
    assert [s.name for s in due] == ["on", "also_on"]
    assert due_subscriptions(subs, lambda _name: False, 4) == []


def test_an_unreadable_switch_is_off() -> None:
    assert due_subscriptions([_subscription("q")], _broken, 4) == []


def test_an_owed_batch_is_computed_whatever_the_switch_says() -> None:
    owing = _subscription("owing", _Owing(4))
    paid = _subscription("paid", _Owing(3))
    plain = _subscription("plain", object())  # a sink without owed(): owes nothing
    due = due_subscriptions([owing, paid, plain], lambda _name: False, 4)
    assert [s.name for s in due] == ["owing"], "only the batch it delivered, not stored"
    assert due_subscriptions([owing], _broken, 4) == [owing]
