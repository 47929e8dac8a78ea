"""The topics an application reads and writes, and the records it writes to them, for both
engines: one layout, one way from the core's `Transition` to Kafka records.

layout.py   the topic names (`<application-id>-handoff`, `-state`, `-dlq`, the outputs), how
            their partitions line up and what each is created with
broker.py   asking the broker: input partition counts, creating what is absent, size limits
emit.py     a Transition as records: outputs, dead letters and handoffs (key, value, partition),
            and the `hydrator.*` headers a record leaves with
"""
