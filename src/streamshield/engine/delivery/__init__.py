"""Delivery: SecFilter at the output of a query, with each recipient's rights of now.

Owns the last check before a row reaches a person (deny by default): the delivery
sink that fans a query's output out to its subscribers (``delivery``), the
recipient's own check on each row (``recipient_check``), and the collection of a
batch's rows once per recipient class (``collected_rows``, ``observed_collect``,
``shared_rows``) so that many subscribers cost one Spark job. Queries and shared
networks hand their output here; the server's subscriptions read what it delivers.
"""

from streamshield.engine.delivery.delivery import Delivery
from streamshield.engine.delivery.shared_rows import SharedRows

__all__ = ["Delivery", "SharedRows"]
