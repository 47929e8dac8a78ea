"""Where the broker of the tests and of `hydrator demo`, Tansu (0.6), answers unlike Apache Kafka,
and what the hydrator does about it: the decisions in code are here, each with the behaviour it
answers and what it costs on Apache Kafka. docs/tansu.md lists them all for readers, these and
the ones that are a design of their own module:

* records of an aborted or dead transaction stay visible to read_committed readers: every
  changelog record names the input offsets its transaction commits (engines/embedded/changelog.py)
  and the restore skips a dead transaction's records; outputs and changelog are flushed before
  the offsets join the transaction (engines/embedded/transaction.py);
* an open transaction never times out: a run with fewer workers than the last aborts what the
  missing workers' transactional ids left open (EmbeddedEngine._fence_missing_workers);
* ListOffsets(latest) undercounts and the read_committed high watermark is 0 while a transaction
  is open: ends are found by reading to end-of-partition (kafka/offsets.OffsetProbe);
* DescribeConfigs answers only what a topic was created with: a topic's size limit falls back to
  what the engine creates it with (kafka/admin.max_message_bytes);
* a LeaveGroup from the leader of a forming group leaves the group waiting for it for ever: the
  embedded engine ends without closing its consumer (EmbeddedEngine.in_group).
"""

from __future__ import annotations

# A group join settles in ~23 s on Tansu with librdkafka's 45 s session timeout, ~3 s with 6 s.
# On Apache Kafka: a member that sends no heartbeat for 6 s (a process paused that long) is
# dropped and its partitions rebalanced, where 45 s would have waited. -X consumer.* tunes both.
SESSION_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 1500

# Tansu holds a fetch for its whole wait even when records arrive (Apache Kafka answers at once),
# and every record then waits that long. On Apache Kafka: an idle consumer asks 40 times a
# second instead of twice (requests, no latency gained).
FETCH_WAIT_MAX_MS = 25

# After an outage librdkafka's re-bootstrap (its default, "rebootstrap") dropped the transaction
# coordinator, and send_offsets_to_transaction then waited on it past its timeout, for ever
# (librdkafka 2.16 on Tansu). With "none" the producer reconnects to the brokers it knows. On
# Apache Kafka: a producer whose every known broker is gone for good (the cluster moved to new
# addresses) does not go back to the bootstrap servers; the engine's restart after a failure does.
METADATA_RECOVERY_STRATEGY = "none"

# Tansu answers ListOffsets(earliest) with the base offset of the batch it *stored* first, not
# offset 0, when producers wrote a partition's first batches at the same moment; a reader that
# starts at OFFSET_BEGINNING skips those batches. Readers that mean "from the start" start at
# offset 0 with `auto.offset.reset` earliest, and low watermarks above 0 are checked by a fetch
# from 0 (kafka/offsets.OffsetProbe.first_offsets). On Apache Kafka: a partition whose log starts
# past 0 (retention) costs one out-of-range fetch and the reset, and a probe's fetch from 0.
FIRST_OFFSET = 0


def lists_offsets_wrongly(cluster_id: str | None) -> bool:
    """Whether the broker's ListOffsets answers cannot be taken as they come: Tansu's (its cluster
    id is `tansu_cluster` unless configured). Only there does the Spark engine's source find its
    offsets by fetching (engines/spark/kafka_offsets.py); on Apache Kafka it lists them, at no
    cost."""
    return (cluster_id or "").startswith("tansu")
