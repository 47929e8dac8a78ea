"""The shared way from a core Transition to Kafka records (hydrator/topology/emit.py): outputs,
dead letters, handoffs (key, value, partition, header), the one-of-each rule for the headers the
engine writes, and that both engines read the handoff records either writes."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from hydrator.core import DeadLetter, HydrationSettings, RawRecord, Transition
from hydrator.core.hydrator import read_handoff
from hydrator.core.records import HEADER_ERROR, HEADER_FILLED, HEADER_SOURCE, OutputRecord
from hydrator.engines.embedded.counts import RunCounts
from hydrator.engines.embedded.sized_sink import SizeCheckedSink
from hydrator.engines.spark.routing import group_of, route
from hydrator.engines.spark.stateful import HydratorSpec, hydrator_for, unpack_record
from hydrator.events import Headers
from hydrator.kafka.partitioner import partition_for_key
from hydrator.kafka.record_limits import RecordLimits
from hydrator.topology.emit import (
    ENGINE_HEADERS,
    HEADER_SOURCE_ORIGINAL,
    KafkaRecord,
    TopicWriter,
    emit,
    handoff_record,
    leaving_headers,
)
from hydrator.topology.layout import Topology
from state.handoff import Handoff
from tests.harness.cdc_events import Record, ToastTable
from tests.support.core import debezium_hydrator, engine_step
from tests.unit.engines.spark.test_spark_steps import source_batch

TOPOLOGY = Topology("app", {"db.t": "db.t.out", "db.u": "db.u.out"}, 6)


def _emitted(step: Transition, input_topic: str = "db.t") -> list[tuple[Any, ...]]:
    written: list[KafkaRecord] = []
    emit(step, input_topic, TOPOLOGY, TopicWriter(TOPOLOGY, written.append))
    return written


def _raw(record: Record, offset: int, headers: Headers = ()) -> RawRecord:
    key, value, own = record
    return RawRecord("db.t", 2, offset, key, value, (*own, *headers))


def test_outputs_go_to_their_inputs_output_topic_and_partition() -> None:
    record = OutputRecord(4, b"k", b"v", (("a", b"1"), (HEADER_SOURCE, b"db.u:4:9")))
    ((topic, partition, key, value, headers),) = _emitted(Transition(None, (record,)), "db.u")
    assert (topic, partition, key, value) == ("db.u.out", 4, b"k", b"v")
    assert headers == record.headers


def test_a_dead_letter_goes_to_the_dlq_with_its_reason_and_source() -> None:
    bad = RawRecord("db.t", 3, 17, b"k", b"not json", (("trace", b"x"),))
    ((topic, partition, key, value, headers),) = _emitted(
        Transition(None, dead=(DeadLetter(bad, "no"),))
    )
    assert (topic, partition, key, value) == ("app-dlq", 3, b"k", b"not json")
    assert headers == (("trace", b"x"), (HEADER_ERROR, b"no"), (HEADER_SOURCE, b"db.t:3:17"))


def test_a_handoff_is_keyed_by_its_new_keys_state_key_and_sent_to_its_owner() -> None:
    image = {"id": 3, "doc": "x"}
    handoff = Handoff("db.t", '{"id":9}', '{"id":3}', image, (5,), "db.t:0:4", b'{"id": 9}')
    ((topic, partition, key, value, headers),) = _emitted(Transition(None, handoffs=(handoff,)))
    assert topic == "app-handoff"
    assert partition == partition_for_key(b'{"id": 9}', 6)
    assert key == b'db.t\x00{"id":9}'
    assert Handoff.decode(value) == handoff
    assert headers == ((HEADER_SOURCE, b"db.t:0:4"),)
    assert handoff_record(handoff) == (key, value, headers)


def test_a_handoff_a_task_of_this_process_takes_is_not_written() -> None:
    handoff = Handoff("db.t", '{"id":9}', '{"id":3}', None, None, "db.t:0:4")
    taken: list[tuple[int, Handoff]] = []
    written: list[KafkaRecord] = []

    def keep_local(partition: int, kept: Handoff) -> bool:
        taken.append((partition, kept))
        return True

    step = Transition(None, handoffs=(handoff,))
    emit(step, "db.t", TOPOLOGY, TopicWriter(TOPOLOGY, written.append), keep_local)
    assert written == [] and taken == [(TOPOLOGY.handoff_partition(handoff), handoff)]


def test_a_replayed_dead_letter_leaves_with_one_source_and_the_old_one_kept() -> None:
    """A dead letter of an earlier run, fixed and replayed into the input: it carries the
    hydrator.source (and hydrator.error) that run wrote."""
    hydrator = debezium_hydrator()
    table = ToastTable()
    replayed = ((HEADER_ERROR, b"old reason"), (HEADER_SOURCE, b"db.t:0:41"), ("trace", b"t"))
    step = engine_step(hydrator, None, _raw(table.insert(1), 7, replayed), 1000)
    ((topic, _, _, _, headers),) = _emitted(step)
    assert topic == "db.t.out"
    assert [value for name, value in headers if name == HEADER_SOURCE] == [b"db.t:2:7"]
    assert dict(headers)[HEADER_SOURCE_ORIGINAL] == b"db.t:0:41"
    # what the engine did not write on this record stays as it came
    assert dict(headers)[HEADER_ERROR] == b"old reason" and dict(headers)["trace"] == b"t"

    dead = DeadLetter(RawRecord("db.t", 2, 8, b"k", b"{", replayed), "bad json")
    ((topic, _, _, _, headers),) = _emitted(Transition(None, dead=(dead,)))
    assert topic == "app-dlq"
    assert [n for n, _ in headers].count(HEADER_ERROR) == 1
    assert dict(headers)[HEADER_ERROR] == b"bad json"
    assert [v for n, v in headers if n == HEADER_SOURCE] == [b"db.t:2:8"]
    assert dict(headers)[HEADER_SOURCE_ORIGINAL] == b"db.t:0:41"


def test_the_first_source_of_a_record_replayed_twice_stays_the_original() -> None:
    headers = (
        (HEADER_SOURCE_ORIGINAL, b"first"),
        (HEADER_SOURCE, b"second"),
        (HEADER_FILLED, b"a"),
        (HEADER_FILLED, b"b"),
        (HEADER_SOURCE, b"third"),
    )
    assert leaving_headers(headers) == (
        (HEADER_SOURCE_ORIGINAL, b"first"),
        (HEADER_FILLED, b"b"),
        (HEADER_SOURCE, b"third"),
    )


def test_headers_without_a_repeat_are_left_as_they_are() -> None:
    headers = (("trace", b"1"), ("trace", b"2"), (HEADER_FILLED, b"a"), (HEADER_SOURCE, b"s"))
    assert leaving_headers(headers) is headers


_names = st.sampled_from([*sorted(ENGINE_HEADERS), HEADER_SOURCE_ORIGINAL, "trace", "hydrator.x"])
_headers = st.lists(st.tuples(_names, st.none() | st.binary(max_size=3)), max_size=8)


@given(_headers, _headers)
def test_one_of_each_engine_header_and_the_engines_values_win(
    incoming: list[tuple[str, bytes | None]], written: list[tuple[str, bytes | None]]
) -> None:
    ours = [(name, value) for name, value in written if name in ENGINE_HEADERS]
    ours = list({name: (name, value) for name, value in ours}.values())  # one of each
    headers = leaving_headers((*incoming, *ours))
    names = [name for name, _ in headers]
    for name in ENGINE_HEADERS:
        assert names.count(name) <= 1
    assert set(ours) <= set(headers)

    # other headers keep their order; an incoming source survives as the original
    def others(of: Any) -> list[tuple[str, bytes | None]]:
        return [(n, v) for n, v in of if n not in ENGINE_HEADERS and n != HEADER_SOURCE_ORIGINAL]

    assert others(headers) == others(incoming)
    sources = [v for n, v in incoming if n == HEADER_SOURCE]
    originals = [v for n, v in incoming if n == HEADER_SOURCE_ORIGINAL]
    if any(n == HEADER_SOURCE for n, _ in ours) and sources and not originals:
        assert (HEADER_SOURCE_ORIGINAL, sources[0]) in headers
    assert leaving_headers(headers) == headers


def test_both_engines_read_the_handoff_records_of_either_and_of_older_releases() -> None:
    """The embedded engine reads a handoff by its value (its partition says which task), so the
    key it wrote before (the bare new key) and the shared one read alike. The Spark engine
    groups a handoff by its key: the shared key is the group of the new key's inputs, the key
    the Spark engine wrote before too."""
    hydrator = debezium_hydrator()
    table = ToastTable()
    step = None
    state = None
    records = [table.insert(3), *table.change_key(3, 1009)]
    for offset, record in enumerate(records):
        step = engine_step(hydrator, state, _raw(record, offset), 1000)
        state = step.state
        if step.handoffs:
            break
    assert step is not None
    (handoff,) = step.handoffs
    key, value, _ = handoff_record(handoff)
    for written_key in (key, handoff.new_key.encode()):  # shared; the embedded one before
        read = read_handoff(RawRecord("app-handoff", 1, 0, written_key, value))
        assert read == handoff

    spec = HydratorSpec(HydrationSettings())
    expected = group_of(hydrator_for(spec), _raw(records[-1], 99))  # the new key's CREATE
    rows = [("app-handoff", 1, 0, key, value, None, 0)]
    (batch,) = route(spec, "app-handoff")(iter([source_batch(rows)]))
    (group,) = batch.column("group").to_pylist()
    assert group == expected == f"db.t\x00{handoff.new_key}"
    (packed,) = batch.column("record").to_pylist()
    assert unpack_record(packed)[5] == value


def test_a_handoff_too_large_for_its_topic_is_a_dead_letter_naming_its_source() -> None:
    """The embedded engine measures the very record TopicWriter would write (key, value and
    header); one over the handoff topic's limit goes to the DLQ, keyed and sourced like it."""
    written: list[KafkaRecord] = []
    counts = RunCounts()
    limits = RecordLimits("app-dlq", {"app-handoff": 200, "app-dlq": 10_000}, 10**6)
    sink = SizeCheckedSink(TopicWriter(TOPOLOGY, written.append), limits, TOPOLOGY, counts)
    small = Handoff("db.t", '{"id":9}', '{"id":3}', {"id": 3}, None, "db.t:0:4")
    large = Handoff("db.t", '{"id":8}', '{"id":2}', {"id": 2, "doc": "x" * 500}, None, "db.t:0:5")
    emit(Transition(None, handoffs=(small, large)), "db.t", TOPOLOGY, sink)
    (handoff, dead) = written
    assert handoff[0] == "app-handoff" and Handoff.decode(handoff[3]) == small
    assert dead[0] == "app-dlq" and dead[2] == b'db.t\x00{"id":8}'
    assert dead[1] == TOPOLOGY.handoff_partition(large)
    assert dict(dead[4])[HEADER_SOURCE] == b"db.t:0:5"
    assert b"app-handoff" in dict(dead[4])[HEADER_ERROR]
    assert counts.batch("db.t")["oversize_records"] == 1
