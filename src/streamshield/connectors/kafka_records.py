"""One Kafka record as one landing line, or the reason it is refused.

A record's value is read as any broker message is (:mod:`.record_lines`): in the
``element`` format a wire-format element without ``seq`` (the record's offset is its
seq), in the ``values`` format a tuple's attribute values alone. A record that names
another stream or provider than its partition's channel is refused (``wrong_channel``).
"""

from __future__ import annotations

from streamshield.connectors.record_lines import Format, Refused, record_line

__all__ = ["Format", "Refused", "record_line"]
