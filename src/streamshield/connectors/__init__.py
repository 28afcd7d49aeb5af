"""Connectors: where streams come from and go to besides the HTTP API.

A connector is the secured hop between a broker and the engine. A source lands what a
broker holds through the same gate as ``POST /streams/{name}/elements`` (the provider's
WRITE and INJECT SP, the wire format, per-channel order), so policies, the Security
Shield and the audit work exactly as for appended elements.

* :mod:`.kafka_binding` -- what an administrator binds: a topic to a stream, each
  partition to the provider whose records it carries;
* :mod:`.kafka_records` -- one Kafka record as one landing line, or the reason it is
  refused (pure: no broker, no JVM);
* :mod:`.kafka_source` -- the consumer thread: offsets as seqs, exactly once with the
  landing zone's last seq per channel, back-off on outages.
"""
