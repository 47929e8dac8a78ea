"""Kafka partition discovery and offset look-ups for the Spark source (driver side).

Offsets travel through Spark as JSON shaped like Spark's own Kafka source:
`{"topic": {"0": 42, "1": 7}}` = the next offset to read per partition. Spark's checkpoint (the
offset log) owns them; nothing is committed to a consumer group.

End offsets are the *last stable offset* (read_committed), so a batch never ends inside an open
transaction and re-reading a batch after a failure yields the same records. Two ways to get them:

* `list`: the ListOffsets API (admin client, READ_COMMITTED) - what Apache Kafka answers correctly.
* `fetch`: for brokers whose ListOffsets is wrong. Tansu 0.6 answers "base offset of the last batch
  + 1" (short by the batch size minus one) and 0 while a transaction is open, but its fetch
  responses carry the right high watermark, and librdkafka reports the end of a partition
  (PARTITION_EOF) exactly at the last stable offset under read_committed. So a probe consumer seeks
  to a known lower bound and searches for the offset where EOF is reported.

`auto` picks `fetch` when the cluster id is Tansu's (it reports `tansu_cluster` unless configured).
With `fetch`, earliest offsets are checked the same way: Tansu's ListOffsets(earliest) names the
batch it stored first, so where that is above 0 the probe fetches from 0.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

from confluent_kafka import Consumer, IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from hydrator.kafka import consumed
from hydrator.kafka.broker_quirks import lists_offsets_wrongly
from hydrator.kafka.offsets import OffsetProbe

TP = tuple[str, int]
Offsets = dict[TP, int]

# A partition missing from the start offsets was added after the batch before was planned:
# read it from its beginning, as Spark's Kafka source does for new partitions.
EARLIEST = -2

_REQUEST_TIMEOUT_S = 30.0
# Under the fetch strategy a probe position past the last stable offset gets no answer at all
# (no record, no EOF); this is how long a round waits before concluding that.
_PROBE_SILENCE_S = 1.0
_PROBE_MAX_ROUNDS = 64
# Required by the client, never used: probes only assign partitions.
_PROBE_GROUP = "hydrator-offset-probe"


def offsets_to_json(offsets: Mapping[TP, int]) -> dict[str, dict[str, int]]:
    """Canonical order, so equal offsets serialise to equal JSON (Spark compares the strings)."""
    result: dict[str, dict[str, int]] = {}
    for topic, partition in sorted(offsets):
        result.setdefault(topic, {})[str(partition)] = int(offsets[(topic, partition)])
    return result


def offsets_from_json(data: Mapping[str, Mapping[str, int]] | None) -> Offsets:
    if not data:
        return {}
    return {
        (topic, int(partition)): int(offset)
        for topic, partitions in data.items()
        for partition, offset in partitions.items()
    }


def _admin_config(config: Mapping[str, str]) -> dict[str, str | int | float | bool]:
    # Consumer-only properties make the admin client log warnings; keep the connection settings.
    skip = {"isolation.level", "auto.offset.reset", "enable.auto.commit", "group.id"}
    return {k: v for k, v in config.items() if k not in skip and not k.startswith("fetch.")}


class OffsetReader:
    """Driver-side view of the subscribed topics: partitions, earliest and end offsets."""

    def __init__(
        self,
        consumer_config: Mapping[str, str],
        admin_config: Mapping[str, str],
        topics: list[str],
        strategy: str,
    ) -> None:
        self._config = dict(consumer_config)
        self._admin_config = _admin_config(admin_config)
        self._topics = topics
        # Subscribed topics the last metadata did not list at all (deleted, or not created yet).
        self.absent: frozenset[str] = frozenset()
        self._strategy = strategy
        self._admin: AdminClient | None = None
        self._probe: Consumer | None = None

    # -- clients, created on first use: the reader object is also pickled to executors -----------

    def _admin_client(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient(self._admin_config)
        return self._admin

    def _probe_consumer(self) -> Consumer:
        if self._probe is None:
            config: dict[str, str | int | bool] = dict(self._config)
            config.update(
                {
                    "group.id": config.get("group.id", _PROBE_GROUP),
                    "enable.auto.commit": False,
                    "enable.auto.offset.store": False,
                    "enable.partition.eof": True,
                    "isolation.level": "read_committed",
                    # A probe below the log start (retention) should land on the first record.
                    "auto.offset.reset": "earliest",
                    # Keep the probe from downloading data it throws away: one batch per answer.
                    "max.partition.fetch.bytes": 1,
                    "queued.min.messages": 1,
                    "fetch.wait.max.ms": 10,
                    "fetch.error.backoff.ms": 10,
                    # With a one-message queue every answer "fills" it, and librdkafka then waits
                    # fetch.queue.backoff.ms (1 s by default) before fetching that partition again.
                    "fetch.queue.backoff.ms": 5,
                }
            )
            self._probe = Consumer(config)
        return self._probe

    def close(self) -> None:
        if self._probe is not None:
            self._probe.close()
            self._probe = None
        self._admin = None

    @property
    def strategy(self) -> str:
        if self._strategy == "auto":
            metadata = self._admin_client().list_topics(timeout=_REQUEST_TIMEOUT_S)
            wrong = lists_offsets_wrongly(metadata.cluster_id)
            self._strategy = "fetch" if wrong else "list"
        return self._strategy

    # -- look-ups ---------------------------------------------------------------------------------

    def partitions(self) -> list[TP]:
        """Every partition of the subscribed topics that exist now (a missing topic has none)."""
        # Metadata for all topics, not per topic: a request naming a missing topic makes the
        # broker auto-create it (Tansu always, Kafka by default) with the default partition count.
        metadata = self._admin_client().list_topics(timeout=_REQUEST_TIMEOUT_S)
        self.absent = frozenset(t for t in self._topics if t not in metadata.topics)
        found: list[TP] = []
        for topic in self._topics:
            described = metadata.topics.get(topic)
            if described is None or described.error is not None:
                continue
            found.extend((topic, p) for p in described.partitions)
        return sorted(found)

    def earliest(self, tps: Iterable[TP]) -> Offsets:
        listed = self._list_offsets(list(tps), OffsetSpec.earliest())
        if self.strategy == "list":
            return listed
        # Tansu answers with the base offset of the batch it stored first, not the lowest one,
        # once producers wrote the partition at the same time (hydrator/kafka/offsets.py).
        doubtful = {tp: offset for tp, offset in listed.items() if offset > 0}
        if doubtful:
            probe = OffsetProbe({"group.id": _PROBE_GROUP, **self._config})
            try:
                listed.update(probe.first_offsets(doubtful))
            finally:
                probe.close()
        return listed

    def latest(self, tps: Iterable[TP], known: Mapping[TP, int] | None = None) -> Offsets:
        """Last stable offset per partition. `known` holds offsets already proven readable
        (a batch's start); the fetch strategy searches upwards from them."""
        tps = list(tps)
        if not tps:
            return {}
        if self.strategy == "list":
            return self._list_offsets(tps, OffsetSpec.latest())
        return self._probe_ends(tps, known or {})

    def _list_offsets(self, tps: list[TP], spec: OffsetSpec) -> Offsets:
        if not tps:
            return {}
        request = {TopicPartition(t, p): spec for t, p in tps}
        futures = self._admin_client().list_offsets(
            request,
            isolation_level=IsolationLevel.READ_COMMITTED,
            request_timeout=_REQUEST_TIMEOUT_S,
        )
        return {(tp.topic, tp.partition): f.result().offset for tp, f in futures.items()}

    def _probe_ends(self, tps: list[TP], known: Mapping[TP, int]) -> Offsets:
        consumer = self._probe_consumer()
        # Invariant per partition: low <= last stable offset < high (high None = unknown).
        low = {tp: max(known.get(tp, 0), 0) for tp in tps}
        high: dict[TP, int | None] = dict.fromkeys(tps)
        position = dict(low)
        silent_at: dict[TP, int] = {}
        found: Offsets = {}
        try:
            for _ in range(_PROBE_MAX_ROUNDS):
                pending = [tp for tp in tps if tp not in found]
                if not pending:
                    return found
                answers = self._probe_round(consumer, {tp: position[tp] for tp in pending})
                for tp in pending:
                    kind, offset = answers.get(tp, ("silent", position[tp]))
                    if kind == "eof":
                        found[tp] = offset
                        continue
                    if kind == "record":
                        low[tp] = offset + 1
                        if (bound := high[tp]) is not None and bound <= low[tp]:
                            high[tp] = None  # a transaction committed meanwhile; search again
                    elif silent_at.get(tp) != position[tp]:
                        # A slow broker looks the same as a position past the last stable
                        # offset; only a second silence at the same position counts.
                        silent_at[tp] = position[tp]
                        continue
                    else:
                        high[tp] = position[tp]
                    upper = high[tp]
                    if upper is not None and upper - low[tp] <= 1:
                        found[tp] = low[tp]
                    elif upper is None:
                        watermark = consumer.get_watermark_offsets(
                            TopicPartition(*tp), cached=True
                        )[1]
                        position[tp] = max(watermark, low[tp])
                    else:
                        position[tp] = (low[tp] + upper) // 2
            raise KafkaException(
                KafkaError(KafkaError._TIMED_OUT, f"could not settle end offsets of {tps}")
            )
        finally:
            consumer.unassign()

    @staticmethod
    def _probe_round(consumer: Consumer, positions: Mapping[TP, int]) -> dict[TP, tuple[str, int]]:
        consumer.assign([TopicPartition(t, p, off) for (t, p), off in positions.items()])
        answers: dict[TP, tuple[str, int]] = {}
        deadline = time.monotonic() + _PROBE_SILENCE_S
        while len(answers) < len(positions):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            for message in consumer.consume(num_messages=len(positions), timeout=min(left, 0.05)):
                tp = (consumed.topic(message), consumed.partition(message))
                if tp not in positions or tp in answers:
                    continue
                error = message.error()
                if error is None:
                    answers[tp] = ("record", consumed.offset(message))
                elif error.code() == KafkaError._PARTITION_EOF:
                    answers[tp] = ("eof", consumed.offset(message))
                elif error.code() == KafkaError.OFFSET_OUT_OF_RANGE:
                    answers[tp] = ("silent", positions[tp])
                else:
                    raise KafkaException(error)
        return answers
