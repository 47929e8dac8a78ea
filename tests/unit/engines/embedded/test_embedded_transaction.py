"""The batch transaction against a recording producer: what is produced, in which order, and
where a restore of each changelog partition resumes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka import TopicPartition

from hydrator.core.records import OutputRecord
from hydrator.engines.embedded import changelog
from hydrator.engines.embedded.transaction import TransactionalWriter, TransactionFailed
from hydrator.topology.emit import TopicWriter
from hydrator.topology.layout import Topology


@dataclass
class _Msg:
    _partition: int
    _offset: int

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset


@dataclass
class RecordingProducer:
    """Assigns offsets per (topic, partition) and reports deliveries on flush, as librdkafka
    would; `deliver` False drops the reports (a broken broker)."""

    deliver: bool = True
    calls: list[tuple[Any, ...]] = field(default_factory=list)
    _offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    _pending: list[tuple[Any, _Msg]] = field(default_factory=list)

    def begin_transaction(self) -> None:
        self.calls.append(("begin",))

    def produce(
        self,
        topic: str,
        value: Any,
        key: Any,
        partition: int,
        headers: Any,
        on_delivery: Any = None,
        timestamp: int = 0,
    ) -> None:
        offset = self._offsets.get((topic, partition), 0)
        self._offsets[(topic, partition)] = offset + 1
        self.calls.append(("produce", topic, partition, key, headers, on_delivery is not None))
        if on_delivery is not None and self.deliver:
            self._pending.append((on_delivery, _Msg(partition, offset)))

    def flush(self, timeout: float) -> int:
        self.calls.append(("flush",))
        for callback, msg in self._pending:
            callback(None, msg)
        self._pending.clear()
        return 0

    def send_offsets_to_transaction(self, offsets: Any, metadata: Any, timeout: float) -> None:
        self.calls.append(("offsets", len(offsets)))

    def commit_transaction(self, timeout: float) -> None:
        self.calls.append(("commit",))

    def abort_transaction(self, timeout: float) -> None:
        self.calls.append(("abort",))


TOPOLOGY = Topology("app", {"in": "out"}, 2)


def test_outputs_and_changelog_delivered_then_offsets_in_one_transaction() -> None:
    producer = RecordingProducer()
    writer = TransactionalWriter(producer, TOPOLOGY)  # type: ignore[arg-type]
    TopicWriter(TOPOLOGY, writer.write).output("in", OutputRecord(1, b"k", b"v", (("h", b"1"),)))
    changes = {0: {b"a": b"1", b"b": b"2", b"c": None}, 1: {b"d": b"4"}}
    offsets = [TopicPartition("in", 0, 7), TopicPartition("app-handoff", 0, 3)]
    witness = TopicPartition("in", 1, 9)
    written = writer.commit(changes, [*offsets, witness], None, witness)

    kinds = [call[0] for call in producer.calls]
    # one flush delivers outputs and changelog together, before the offsets go
    assert kinds == ["begin", "produce", *["produce"] * 4, "flush", "offsets", "commit"]
    output = producer.calls[1]
    assert output[1:5] == ("out", 1, b"k", [("h", b"1")])
    changelog = [c for c in producer.calls if c[0] == "produce" and c[1] == "app-state"]
    # one delivery report per partition: on its last record, which has the highest offset
    assert [(c[2], c[3], c[5]) for c in changelog] == [
        (0, b"a", False),
        (0, b"b", False),
        (0, b"c", True),
        (1, b"d", True),
    ]
    assert written == {0: 3, 1: 1}
    # each changelog record names the input positions its transaction commits for its task,
    # and every one the same witness of the whole transaction
    assert {c[2]: c[4] for c in changelog} == {
        0: [
            ("hydrator.offsets", b'{"in":7,"app-handoff":3}'),
            ("hydrator.witness", b'["in",1,9]'),
        ],
        1: [("hydrator.offsets", b'{"in":9}'), ("hydrator.witness", b'["in",1,9]')],
    }
    assert not writer.in_transaction


def test_a_task_that_read_nothing_still_names_its_transaction_s_witness() -> None:
    """Its state changed through another task's handoff: its records must die with the batch."""
    producer = RecordingProducer()
    writer = TransactionalWriter(producer, TOPOLOGY)  # type: ignore[arg-type]
    witness = TopicPartition("in", 0, 7)
    writer.commit({0: {b"a": b"1"}, 3: {b"b": b"2"}}, [witness], None, witness)
    changelog = [c for c in producer.calls if c[0] == "produce" and c[1] == "app-state"]
    assert {c[2]: c[4] for c in changelog} == {
        0: [("hydrator.offsets", b'{"in":7}'), ("hydrator.witness", b'["in",0,7]')],
        3: [("hydrator.witness", b'["in",0,7]')],
    }


def test_a_changelog_partition_without_a_delivery_report_fails_the_batch() -> None:
    writer = TransactionalWriter(RecordingProducer(deliver=False), TOPOLOGY)  # type: ignore[arg-type]
    with pytest.raises(TransactionFailed, match="no delivery report"):
        writer.commit({0: {b"a": b"1"}}, [], None)


def test_a_transaction_s_witness_is_a_position_past_the_committed_one() -> None:
    committed = changelog.CommittedOffsets([TopicPartition("in", 0, 5), TopicPartition("in", 1, 9)])
    assert committed.witness([TopicPartition("in", 0, 5), TopicPartition("in", 1, 9)]) is None
    moved = committed.witness([TopicPartition("in", 0, 5), TopicPartition("in", 1, 12)])
    assert (moved.topic, moved.partition, moved.offset) == ("in", 1, 12)
    # a partition nothing was committed for moves with its first record
    assert committed.witness([TopicPartition("app-handoff", 0, 0)]) is not None
    committed.load([TopicPartition("in", 1, 12), TopicPartition("in", 0, -1001)])
    assert (committed.of("in", 0), committed.of("in", 1)) == (-1, 12)
    assert committed.partition(1) == {"in": 12}


def test_a_record_is_judged_by_its_transaction_s_witness_in_every_task() -> None:
    """A task whose own positions did not move (a handoff from another task changed its state)
    still learns that its transaction died: from the witness, which every record carries."""
    headers = [("hydrator.offsets", b'{"in":3}'), ("hydrator.witness", b'["in",0,8]')]
    died = changelog.CommittedOffsets([TopicPartition("in", 0, 7), TopicPartition("in", 3, 3)])
    assert changelog.never_committed(headers, died, 3)
    lived = changelog.CommittedOffsets([TopicPartition("in", 0, 8), TopicPartition("in", 3, 3)])
    assert not changelog.never_committed(headers, lived, 3)


def test_without_a_witness_a_record_is_judged_by_its_own_positions() -> None:
    header = [("hydrator.offsets", b'{"in":7,"app-handoff":3}')]

    def committed(source: int | None, handoffs: int | None) -> changelog.CommittedOffsets:
        offsets = {"in": source, "app-handoff": handoffs}
        return changelog.CommittedOffsets(
            TopicPartition(topic, 0, offset) for topic, offset in offsets.items() if offset
        )

    assert not changelog.never_committed(header, committed(7, 3), 0)
    assert not changelog.never_committed(header, committed(9, 3), 0)
    assert changelog.never_committed(header, committed(6, 3), 0)
    assert changelog.never_committed(header, committed(7, None), 0)  # no handoff committed
    # another partition's commits say nothing about this one
    assert changelog.never_committed(header, committed(7, 3), 1)
    assert not changelog.never_committed(
        None, committed(None, None), 0
    )  # written before the headers


@pytest.mark.parametrize(
    "headers",
    [
        [("hydrator.offsets", b"{not json")],
        [("hydrator.offsets", b'{"in": "7"}')],
        [("hydrator.witness", b'["in", 0]')],
        [("hydrator.witness", b'{"in": 0}')],
    ],
)
def test_an_unreadable_header_names_itself(headers: list[tuple[str, bytes]]) -> None:
    with pytest.raises(changelog.UnreadableHeader, match=f"unreadable {headers[0][0]} header"):
        changelog.never_committed(headers, changelog.CommittedOffsets(), 0)
