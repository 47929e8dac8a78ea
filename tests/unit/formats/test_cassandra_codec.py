"""`--format cassandra`: the Debezium Cassandra connector's events, in the shapes its source code
and documentation give, hydrated cell by cell (last write wins by write time)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import orjson
import pytest

from hydrator import exact
from hydrator.core import DeadLetter, HydrationSettings, Hydrator, RawRecord, Read, Transition
from hydrator.core.records import HEADER_FILLED, HEADER_UNRESOLVED
from hydrator.core.settings import OnUnresolved
from hydrator.formats import FORMAT_NAMES, codec_for
from hydrator.formats.cassandra import CassandraCodec
from state.codec import decode_state, encode_state
from state.record import StateRecord
from tests.support.cassandra_model import (
    CassandraTable,
    cell,
    filled,
    key_schema,
    payload_of,
    source,
    value_schema,
)
from tests.support.core import engine_step

TOPIC = "cass.inventory.customers"
T0 = 1_700_000_000_000_000
KEY = b'{"id":1001,"ck":"a"}'


def hydrator(settings: HydrationSettings | None = None) -> Hydrator:
    return Hydrator(codec_for("cassandra"), settings)


def value(op: str, time: int, **after: Any) -> dict[str, Any]:
    """A bare value as the connector writes it: every column named, unwritten ones null."""
    columns = {"id": cell(1001), "ck": cell("a"), "name": None, "score": None, "note": None}
    columns.update(after)
    columns.update({"_range_start": None, "_range_end": None})
    return {"ts_ms": time // 1000 + 40, "op": op, "source": source(time, 54), "after": columns}


def record(document: Any, offset: int = 0, key: bytes | None = KEY) -> RawRecord:
    raw = document if isinstance(document, bytes) or document is None else exact.dumps(document)
    return RawRecord(TOPIC, 0, offset, key, raw)


class Run:
    """One key's records through the core, as an engine feeds them."""

    def __init__(self, settings: HydrationSettings | None = None) -> None:
        self.hydrator = hydrator(settings)
        self.state: StateRecord | None = None
        self.offset = 0

    def send(self, document: Any, key: bytes | None = KEY) -> Transition:
        self.offset += 1
        step = engine_step(self.hydrator, self.state, record(document, self.offset, key), 0)
        self.state = step.state
        if self.state is not None:  # what the engines keep must survive their codec
            assert decode_state(encode_state(self.state)) == self.state
        return step

    def after(self, document: Any) -> dict[str, Any]:
        step = self.send(document)
        assert not step.dead, step.dead
        (out,) = step.emitted
        return payload_of(out.value)["after"]


def header(step: Transition, name: str) -> str | None:
    (out,) = step.emitted
    found = dict(out.headers).get(name)
    return None if found is None else found.decode()


# -- the shapes the connector writes ------------------------------------------------------------


def test_an_update_gets_the_columns_it_did_not_write_from_earlier_writes() -> None:
    run = Run()
    inserted = value("i", T0, name=cell("Anne"), score=cell(7), note=cell("first"))
    assert run.after(inserted) == payload_of(exact.dumps(inserted))["after"]
    step = run.send(value("u", T0 + 10, note=cell("second")))
    after = payload_of(step.emitted[0].value)["after"]
    assert after["name"] == filled("Anne") == {"value": "Anne", "deletion_ts": None, "set": False}
    assert after["score"] == filled(7)
    assert after["note"] == cell("second")  # what the event wrote stays as written
    assert after["id"] == cell(1001) and after["_range_start"] is None  # never filled
    assert header(step, HEADER_FILLED) == "name,score"
    assert header(step, HEADER_UNRESOLVED) is None


def test_only_the_filled_cells_change_in_the_record() -> None:
    run = Run()
    run.send(value("i", T0, name=cell("Anne")))
    update = value("u", T0 + 10, score=cell(3))
    (out,) = run.send(update).emitted
    expected = value("u", T0 + 10, score=cell(3), name=filled("Anne"))
    assert exact.loads(out.value) == expected
    assert list(exact.loads(out.value)) == list(update)  # members keep their order


def test_a_written_null_is_a_write_and_fills_later_events_with_null() -> None:
    run = Run()
    run.send(value("i", T0, name=cell("Anne")))
    assert run.after(value("u", T0 + 10, name=cell(None)))["name"] == cell(None)
    assert run.after(value("u", T0 + 20, note=cell("n")))["name"] == filled(None)


def test_a_column_never_written_stays_null_and_is_listed_unresolved() -> None:
    run = Run()
    step = run.send(value("i", T0, name=cell("Anne")))
    assert payload_of(step.emitted[0].value)["after"]["score"] is None
    assert header(step, HEADER_UNRESOLVED) == "score,note"
    assert step.counts["unresolved_columns"] == 2


def test_on_unresolved_null_leaves_unknown_columns_null() -> None:
    run = Run(HydrationSettings(on_unresolved=OnUnresolved.NULL))
    run.send(value("i", T0, name=cell("Anne")))
    after = run.after(value("u", T0 + 10, score=cell(1)))
    assert after["name"] == filled("Anne") and after["note"] is None


def test_a_row_delete_writes_deletion_cells_that_later_events_are_filled_from() -> None:
    run = Run()
    run.send(value("i", T0, name=cell("Anne"), score=cell(7)))
    deleted = value("d", T0 + 10, name=cell(None, T0 + 10), score=cell(None, T0 + 10))
    deleted["after"]["note"] = cell(None, T0 + 10)
    step = run.send(deleted)
    assert step.emitted[0].value == exact.dumps(deleted)  # passed on as it came
    assert header(step, HEADER_FILLED) is None
    assert run.after(value("u", T0 + 20, note=cell("back")))["name"] == filled(None)


def test_a_late_older_write_does_not_bring_a_deleted_cell_back() -> None:
    run = Run()
    run.send(value("i", T0, name=cell("Anne")))
    deleted = value("d", T0 + 30, name=cell(None, T0 + 30), score=cell(None, T0 + 30))
    run.send(deleted)
    late = run.after(value("u", T0 + 10, name=cell("Older"), score=cell(1)))
    assert late["name"] == cell("Older")  # the late event itself is passed on as written
    assert run.after(value("u", T0 + 40, note=cell("x")))["name"] == filled(None)


def test_a_delete_in_the_documented_shape_deletes_every_column() -> None:
    """The connector's documentation shows a delete with the key cells carrying the deletion
    time and the other columns null: a row delete removes them all."""
    run = Run()
    run.send(value("i", T0, name=cell("Anne"), score=cell(7)))
    documented = value("d", T0 + 10, id=cell(1001, T0 + 10), ck=cell("a", T0 + 10))
    assert run.send(documented).emitted[0].value == exact.dumps(documented)
    after = run.after(value("u", T0 + 20, note=cell("n")))
    assert after["name"] == filled(None) and after["score"] == filled(None)


def test_replica_duplicates_and_reordering_converge_on_the_latest_write() -> None:
    early = value("i", T0, name=cell("v1"), score=cell(1))
    middle = value("u", T0 + 10, name=cell("v2"))
    late = value("u", T0 + 20, score=cell(3))
    run = Run()
    for document in (late, early, late, middle, early, middle):
        run.send(document)
    assert run.after(value("u", T0 + 30, note=cell("n")))["name"] == filled("v2")
    assert run.state is not None
    assert run.state.image is not None and run.state.image["score"] == cell(3)
    assert run.state.cell_times == {
        "id": T0 + 30,
        "ck": T0 + 30,
        "name": T0 + 10,
        "score": T0 + 20,
        "note": T0 + 30,
    }


def test_an_update_arriving_before_the_insert_it_follows_is_filled_from_it_later() -> None:
    run = Run()
    step = run.send(value("u", T0 + 10, name=cell("new")))
    assert header(step, HEADER_UNRESOLVED) == "score,note"
    run.send(value("i", T0, name=cell("old"), score=cell(5)))
    after = run.after(value("u", T0 + 20, note=cell("n")))
    assert after["name"] == filled("new") and after["score"] == filled(5)


def test_a_cell_whose_ttl_ran_out_fills_as_null() -> None:
    run = Run()
    expires = T0 + 5_000_000
    run.send(value("i", T0, name=cell("temporary", expires), score=cell(1)))
    assert run.after(value("u", expires - 1, note=cell("n")))["name"] == filled("temporary")
    assert run.after(value("u", expires, note=cell("m")))["name"] == filled(None)


def test_a_snapshot_row_is_a_write_of_every_column() -> None:
    table = CassandraTable()
    table.insert((1, "a"), {"name": "Anne", "score": 9})
    snapshot = table.snapshot((1, "a"))
    assert payload_of(snapshot.value or b"")["source"]["snapshot"] == "true"
    run = Run()
    step = run.send(exact.loads(snapshot.value or b""), key=snapshot.record_key)
    assert step.emitted[0].value == snapshot.value and header(step, HEADER_UNRESOLVED) is None
    update = table.update((1, "a"), {"note": "n"})
    after = run.after(exact.loads(update.value or b""))
    assert after["name"] == filled("Anne") and after["tags"] == filled(None)


def test_a_partition_deletion_and_a_range_tombstone_pass_through_and_touch_no_row() -> None:
    run = Run()
    run.send(value("i", T0, name=cell("Anne")))
    kept = run.state
    partition = value("d", T0 + 10, ck=cell(None, T0 + 10), name=cell(None, T0 + 10))
    partition_key = b'{"id":1001,"ck":null}'
    step = run.send(partition, key=partition_key)
    assert step.emitted[0].value == exact.dumps(partition)
    assert step.counts == {"passthrough": 1}
    ranged = CassandraTable().range_tombstone(1001, "a", "m")
    step = run.send(exact.loads(ranged.value or b""), key=ranged.record_key)
    assert step.emitted[0].value == ranged.value and step.counts == {"passthrough": 1}
    run.state = kept
    assert run.after(value("u", T0 + 20, note=cell("n")))["name"] == filled("Anne")


def test_a_kafka_tombstone_passes_through() -> None:
    step = Run().send(None)
    assert step.emitted[0].value is None and step.counts == {"passthrough": 1}


@pytest.mark.parametrize(
    ("fields", "scale"),
    [({"ts_us": T0}, 1), ({"ts_micro": T0}, 1), ({"ts_ms": T0 // 1000}, 1000)],
)
def test_write_time_from_each_connector_generation(fields: dict[str, int], scale: int) -> None:
    base = {"connector": "cassandra", "cluster": "c", "file": "f", "pos": 1}
    first = value("i", 0, name=cell("old"))
    second = value("u", 0, note=cell("n"))
    first["source"] = {**base, **{k: v - 1000 // scale for k, v in fields.items()}}
    second["source"] = {**base, **fields}
    run = Run()
    run.send(second)
    run.send(first)  # older, by its write time
    assert run.state is not None and run.state.cell_times is not None
    assert run.state.cell_times["note"] == T0


def test_source_ts_us_wins_over_the_millisecond_time() -> None:
    later_by_micros = value("u", T0 + 1, name=cell("later"))
    earlier = value("u", T0, name=cell("earlier"))
    assert later_by_micros["source"]["ts_ms"] == earlier["source"]["ts_ms"]
    run = Run()
    run.send(later_by_micros)
    run.send(earlier)
    assert run.after(value("u", T0 + 2, note=cell("n")))["name"] == filled("later")


# -- envelopes and numbers --------------------------------------------------------------------


def test_schema_envelope_round_trips_with_only_the_filled_cells_changed() -> None:
    table = CassandraTable(with_schema=True)
    inserted = table.insert(
        (2**63 - 1, "k"), {"score": -(2**63), "price": "12345678901234567890.0001"}
    )
    updated = table.update((2**63 - 1, "k"), {"name": "n"})
    run = Run()
    run.send(exact.loads(inserted.value or b""), key=inserted.record_key)
    (out,) = run.send(exact.loads(updated.value or b""), key=updated.record_key).emitted
    document = exact.loads(out.value)
    original = exact.loads(updated.value or b"")
    assert document["schema"] == original["schema"] == value_schema()
    after = document["payload"]["after"]
    assert after["score"] == filled(-(2**63)) and type(after["score"]["value"]) is int
    assert after["price"] == filled("12345678901234567890.0001")
    assert after["id"] == cell(2**63 - 1)
    original["payload"]["after"].update(score=after["score"], price=after["price"])
    assert document == original
    assert orjson.loads(updated.record_key)["schema"] == key_schema()


def test_integers_wider_than_64_bits_survive() -> None:
    wide = 123456789012345678901234567890
    run = Run()
    run.send(value("i", T0, score=cell(wide)))
    (out,) = run.send(value("u", T0 + 1, name=cell("n"))).emitted
    assert str(wide).encode() in out.value
    assert exact.loads(out.value)["after"]["score"] == filled(wide)


# -- bad input -----------------------------------------------------------------------------------


def broken(**changes: Any) -> dict[str, Any]:
    document = value("u", T0, name=cell("x"))
    for path, replacement in changes.items():
        target, *rest = path.split("__")
        if rest:
            document[target][rest[0]] = replacement
        else:
            document[target] = replacement
    return document


BAD: list[tuple[str, Any, str]] = [
    ("not JSON", b"{nope", "value is not JSON"),
    ("a JSON list", b"[1]", "JSON list, not an object"),
    ("no op", {"after": {}, "source": source(T0, 1)}, "no 'op' field"),
    ("unknown op", broken(op="c"), "unknown op 'c'"),
    ("op not a string", broken(op=1), "unknown op 1"),
    ("no after", broken(after=None), "with no 'after'"),
    ("after a list", broken(after=[1]), "a JSON list as 'after'"),
    ("cell a string", broken(after__name="Anne"), "cell 'name' is a JSON str, not an object"),
    ("cell a number", broken(after__name=5), "cell 'name' is a JSON int"),
    ("cell a list", broken(after__name=[cell(1)]), "cell 'name' is a JSON list"),
    ("cell without set", broken(after__name={"value": 1, "deletion_ts": None}), "has fields"),
    ("cell with more", broken(after__name={**cell(1), "x": 1}), "has fields"),
    ("set not a bool", broken(after__name={**cell(1), "set": 1}), "'set' is 1"),
    ("deletion_ts text", broken(after__name={**cell(1), "deletion_ts": "1"}), "'deletion_ts'"),
    ("no source", broken(source=None), "no 'source' object"),
    ("no write time", broken(source={"connector": "cassandra"}), "has no write time"),
    ("ts_us a float", broken(source__ts_us=1.5), "source.ts_us is 1.5, not an integer"),
    ("ts_us a string", broken(source__ts_us="1"), 'source.ts_us is "1", not an integer'),
    ("ts_us a bool", broken(source__ts_us=True), "source.ts_us is true, not an integer"),
    ("ts_us too wide", broken(source__ts_us=2**64), "out of range (64 bits)"),
    (
        "schema envelope, payload not object",
        {"schema": {}, "payload": 5},
        "payload is not an object",
    ),
]


@pytest.mark.parametrize(("case", "document", "reason"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_goes_to_the_dlq_with_its_reason(case: str, document: Any, reason: str) -> None:
    step = Run().send(document)
    assert not step.emitted
    (dead,) = step.dead
    assert isinstance(dead, DeadLetter) and reason in dead.reason, dead.reason
    assert dead.reason.startswith("cassandra: BadInput: "), case


def test_a_key_that_is_not_json_goes_to_the_dlq() -> None:
    step = Run().send(value("i", T0), key=b"{id:1")
    (dead,) = step.dead
    assert dead.reason.startswith("cassandra: InvalidKey: key is not JSON")


def test_bad_input_leaves_the_state_as_it_was() -> None:
    run = Run()
    run.send(value("i", T0, name=cell("Anne")))
    kept = run.state
    run.send(broken(after__score="oops"))
    assert run.state == kept


# -- the codec's place among the formats -------------------------------------------------------


def test_registered_and_detectable() -> None:
    assert "cassandra" in FORMAT_NAMES
    codec = codec_for("cassandra")
    assert isinstance(codec, CassandraCodec) and codec.key_in_record_key
    for document in (
        value("i", T0),
        value("d", T0),
        {"schema": value_schema(), "payload": value("u", T0)},
        {**value("u", T0), "source": {"ts_ms": 1}},  # cells, whatever the source says
    ):
        assert codec.accepts(document)
    postgres = {"before": None, "after": {"id": 1}, "source": {}, "op": "c"}
    for document in (
        postgres,
        {**postgres, "op": "r"},  # Debezium's snapshot read: it has a `before`
        {"op": "u", "after": {"id": 1, "v": None}, "source": {"connector": "mysql"}},
        [1],
        {"schema": {}, "payload": 3},
    ):
        assert not codec.accepts(document)
    assert codec.key(Read(record(value("i", T0), key=b'{"ck": "a", "id": 1001}'))) == (
        '{"ck":"a","id":1001}'
    )
    assert codec.key(Read(record(value("i", T0), key=None))) is None


def test_numbers_with_a_fraction_keep_their_digits() -> None:
    """`decimal.handling.mode=double` (the default) and `double`/`float` columns arrive as JSON
    numbers as Java writes them; they come out with the same digits (trailing zeros too), filled
    or not, never through a binary float."""
    raw = exact.dumps(value("i", T0, name=cell("n"), score=cell(0))).replace(
        b'"score":{"value":0', b'"score":{"value":1.10E-5'
    )
    run = Run()
    assert run.send(raw).emitted[0].value == raw
    update = exact.dumps(value("u", T0 + 1, note=cell(2.5))).replace(b"2.5", b"2.50")
    (out,) = run.send(update).emitted
    after = exact.loads(out.value, decimals=True)["after"]
    assert after["score"] == filled(Decimal("1.10E-5")) and after["note"] == cell(Decimal("2.50"))
    assert after["score"]["value"].as_tuple() == Decimal("1.10E-5").as_tuple()
    assert b'"note":{"value":2.50,' in out.value
