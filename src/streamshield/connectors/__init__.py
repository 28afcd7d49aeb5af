"""Connectors: where streams come from and go to besides the HTTP API.

A connector is the secured hop between a broker and the engine. A source lands what a
broker holds through the same gate as ``POST /streams/{name}/elements`` (the provider's
WRITE and INJECT SP, the wire format, per-channel order), so policies, the Security
Shield and the audit work exactly as for appended elements.

* :mod:`.source_binding` -- what every source binding declares: a stream, the channels
  feeding it (who each acts as), the format, the broker's password kept from the API;
* :mod:`.kafka_binding` -- what an administrator binds: a topic to a stream, each
  partition to the provider whose records it carries;
* :mod:`.record_lines` -- one broker message as one landing line, or the reason it is
  refused (pure: no broker, no JVM), for every source (a Kafka record's offset is its
  seq, so it brings none of its own);
* :mod:`.registry_decoder` -- a Kafka value in Confluent's wire format (Avro, JSON
  Schema) decoded with the schema a registry keeps, or why it is refused; a registry
  that does not answer holds the records back;
* :mod:`.source_thread` -- a source's thread: started, stopped, its broker session
  opened again with a back-off, its state summed up for ``/readyz``;
* :mod:`.kafka_source` -- the consumer thread: offsets as seqs, exactly once with the
  landing zone's last seq per channel, back-off on outages;
* :mod:`.mqtt_binding` -- a topic filter bound to a stream, each device to the provider
  its messages act as;
* :mod:`.mqtt_messages` -- one MQTT message as (device, landing line), or the reason it
  is refused (pure);
* :mod:`.mqtt_source` -- the subscriber thread: QoS 1 in a persistent session, acked
  only once landed, redeliveries known again;
* :mod:`.sink_targets` -- where a sink writes one recipient's rows (a Kafka topic, a
  Delta table), one micro-batch at a time with its batch id
  (server/sink_service.py decides what she may receive).
"""
