"""The Debezium bridge yields real events: placeholders in every typed shape of docs/formats.md
for the default replica identity, full images for the REPLICA IDENTITY FULL twin, key-change
headers.

One scripted workload per bridge configuration (a module-scoped Debezium run each):
  1 INSERT id=1 with every TOAST column big
  2 UPDATE id=1 SET small            -> every TOAST column unchanged
  3 UPDATE id=1 SET body, label      -> body changed, the other TOAST columns unchanged
  4 UPDATE id=1 SET id=2             -> DELETE(1) + tombstone + CREATE(2)
  5 DELETE id=2                      -> DELETE(2) + tombstone
"""

from __future__ import annotations

import base64
import json
import logging
import random
import uuid
from dataclasses import dataclass
from typing import Any

import pytest

from tests.harness import oracle
from tests.harness.debezium import BridgeOptions, DebeziumBridge, java_partition_for_key
from tests.harness.kafka import Broker
from tests.harness.oracle import Captured, TwinCapture
from tests.harness.postgres import PgDatabase

pytestmark = pytest.mark.integration

P = oracle.PLACEHOLDER
PARTITIONS = 3


@dataclass(frozen=True)
class Run:
    binary_mode: oracle.BinaryHandlingMode
    schemas_enable: bool
    hstore_mode: str  # Debezium's hstore.handling.mode; "json" is its default

    @property
    def id(self) -> str:
        schemas = str(self.schemas_enable).lower()
        return f"{self.binary_mode}-schemas_{schemas}-hstore_{self.hstore_mode}"

    def placeholders(self) -> dict[str, Any]:
        return oracle.placeholder_shapes(self.binary_mode, self.hstore_mode)

    def encode_bytea(self, data: bytes) -> str:
        return base64.b64encode(data).decode() if self.binary_mode == "bytes" else data.hex()


RUNS = [Run("bytes", False, "json"), Run("hex", True, "map")]


def test_placeholder_shapes_are_design_section_4() -> None:
    """The harness's expectations spelled out literally, as docs/formats.md lists them."""
    as_ints = [
        95,
        95,
        100,
        101,
        98,
        101,
        122,
        105,
        117,
        109,
        95,
        117,
        110,
        97,
        118,
        97,
        105,
        108,
        97,
        98,
        108,
        101,
        95,
        118,
        97,
        108,
        117,
        101,
    ]
    assert oracle.placeholder_shapes("bytes", "json") == {
        "body": P,
        "doc": P,
        "blob": "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==",
        "tags": [P],
        "nums": as_ints,
        "bigs": as_ints,
        "uids": ["b68a35a7-17ad-35b3-af2a-ae46edb4545a"],
        "attrs": '{"__debezium_unavailable_value":"__debezium_unavailable_value"}',
    }
    hex_map = oracle.placeholder_shapes("hex", "map")
    assert hex_map["blob"] == P
    assert hex_map["attrs"] == {P: P}


@dataclass(frozen=True)
class Scripted:
    run: Run
    capture: TwinCapture
    row: dict[str, Any]  # the inserted row (non-key columns)
    new_body: str


@pytest.fixture(scope="module", params=RUNS, ids=[r.id for r in RUNS])
def scripted(
    request: pytest.FixtureRequest,
    debezium_jvm: None,
    kafka_broker: Broker,
    postgres_module: PgDatabase,
) -> Scripted:
    run: Run = request.param
    rng = random.Random(11)
    row = oracle.big_row(rng)
    new_body = oracle.big_row(rng)["body"]
    workload = oracle.Workload.of(
        oracle.insert_statement("insert", 1, row),
        oracle.update_statement(1, {"small": 5}),
        oracle.update_statement(1, {"body": new_body, "label": "changed"}),
        oracle.update_statement(1, {}, new_key=2),
        oracle.delete_statement(2),
    )
    base = f"bridge_{run.binary_mode}_{uuid.uuid4().hex[:6]}"
    capture = oracle.capture_twins(
        postgres_module,
        kafka_broker.bootstrap_servers,
        workload,
        base,
        schemas_enable=run.schemas_enable,
        binary_handling_mode=run.binary_mode,
        partitions=PARTITIONS,
        extra_properties={"hstore.handling.mode": run.hstore_mode},
    )
    return Scripted(run, capture, row, new_body)


def _by_key(records: list[Captured]) -> dict[int, list[Captured]]:
    out: dict[int, list[Captured]] = {}
    for r in records:
        out.setdefault(oracle.payload(r.key)["id"], []).append(r)
    return out


def _ops(records: list[Captured]) -> list[str | None]:
    return [None if r.value is None else oracle.payload(r.value)["op"] for r in records]


def _value(record: Captured) -> dict[str, Any]:
    value = oracle.payload(record.value)
    assert isinstance(value, dict)
    return value


def _hstore(run: Run, value: Any) -> Any:
    return value if run.hstore_mode == "map" or value is None else json.loads(value)


def test_every_record_lands_where_the_java_producer_would_put_it(scripted: Scripted) -> None:
    cap = scripted.capture
    for records in (cap.default, cap.full):
        assert len(records) == cap.workload.expected_records() == 8
        assert {1, 2} == set(_by_key(records))
        for r in records:
            assert r.key is not None
            assert r.partition == java_partition_for_key(r.key, PARTITIONS)
            envelope = json.loads(r.key)
            assert ("schema" in envelope) is scripted.run.schemas_enable
            if r.value is not None:
                assert ("schema" in json.loads(r.value)) is scripted.run.schemas_enable


def test_per_key_event_sequences(scripted: Scripted) -> None:
    for records in (scripted.capture.default, scripted.capture.full):
        by_key = _by_key(records)
        assert _ops(by_key[1]) == ["c", "u", "u", "d", None]
        assert _ops(by_key[2]) == ["c", "d", None]


def test_default_identity_update_carries_placeholders_in_every_typed_shape(
    scripted: Scripted,
) -> None:
    expected = scripted.run.placeholders()
    key1 = _by_key(scripted.capture.default)[1]
    untouched = _value(key1[1])
    assert untouched["before"] is None
    assert {c: untouched["after"][c] for c in expected} == expected
    assert untouched["after"]["small"] == 5
    assert untouched["after"]["label"] == scripted.row["label"]

    partial = _value(key1[2])
    assert partial["after"]["body"] == scripted.new_body
    assert partial["after"]["label"] == "changed"
    assert {c: partial["after"][c] for c in expected if c != "body"} == {
        c: v for c, v in expected.items() if c != "body"
    }


def test_primary_key_change_headers_and_placeholders(scripted: Scripted) -> None:
    expected = scripted.run.placeholders()
    for records, toasted in ((scripted.capture.default, True), (scripted.capture.full, False)):
        by_key = _by_key(records)
        delete, tombstone = by_key[1][3], by_key[1][4]
        create = by_key[2][0]
        # SimpleHeaderConverter renders the key Struct as JSON text, without the schema envelope
        assert delete.header("__debezium.newkey") == b'{"id":2}'
        assert tombstone.value is None
        assert tombstone.header("__debezium.newkey") == b'{"id":2}'
        assert create.header("__debezium.oldkey") == b'{"id":1}'
        assert create.header("__debezium.newkey") is None
        after = _value(create)["after"]
        assert _value(create)["before"] is None
        if toasted:
            # even body, rewritten by the previous UPDATE, is an unchanged TOAST pointer now
            assert {c: after[c] for c in expected} == expected
        else:
            assert after["body"] == scripted.new_body
            assert after["blob"] == scripted.run.encode_bytea(scripted.row["blob"])


def test_default_identity_delete_before_is_key_only(scripted: Scripted) -> None:
    by_key = _by_key(scripted.capture.default)
    for delete in (by_key[1][3], by_key[2][1]):
        value = _value(delete)
        before = value["before"]
        key = oracle.payload(delete.key)["id"]
        assert before == {c: (key if c == "id" else None) for c in oracle.COLUMNS}
        assert value["after"] is None


def test_full_twin_ships_full_images(scripted: Scripted) -> None:
    run, row = scripted.run, scripted.row
    placeholders = scripted.run.placeholders()
    by_key = _by_key(scripted.capture.full)
    images = [_value(r) for r in by_key[1][:4]] + [_value(r) for r in by_key[2][:2]]
    for value in images:
        for image in (value["before"], value["after"]):
            if image is None:
                continue
            for column, placeholder in placeholders.items():
                assert image[column] != placeholder, column
    untouched = images[1]["after"]
    assert untouched["blob"] == run.encode_bytea(row["blob"])
    assert untouched["tags"] == row["tags"]
    assert untouched["nums"] == row["nums"]
    assert untouched["bigs"] == row["bigs"]
    assert untouched["uids"] == [str(u) for u in row["uids"]]
    assert _hstore(run, untouched["attrs"]) == row["attrs"]
    assert json.loads(untouched["doc"]) == row["doc"]
    # REPLICA IDENTITY FULL: every update's and delete's before is the previous full image
    assert images[1]["before"] == images[0]["after"]
    assert images[2]["before"] == images[1]["after"]
    assert images[3]["before"] == images[2]["after"]
    assert images[5]["before"] == images[4]["after"]


def test_envelope_and_schema(scripted: Scripted) -> None:
    record = _by_key(scripted.capture.default)[1][1]
    envelope = json.loads(record.value or b"")
    if not scripted.run.schemas_enable:
        assert {"before", "after", "source", "op", "ts_ms"} <= set(envelope)
        return
    assert set(envelope) == {"schema", "payload"}
    schema = envelope["schema"]
    after = next(f for f in schema["fields"] if f["field"] == "after")
    types = {f["field"]: f["type"] for f in after["fields"]}
    assert types["blob"] == ("bytes" if scripted.run.binary_mode == "bytes" else "string")
    assert types["attrs"] == ("map" if scripted.run.hstore_mode == "map" else "string")
    assert types["nums"] == "array"


def test_bridge_drops_its_slot_and_publication(
    scripted: Scripted, postgres_module: PgDatabase
) -> None:
    with postgres_module.connect() as conn:
        slots = conn.execute(
            "SELECT count(*) FROM pg_replication_slots WHERE slot_name = %s",
            (scripted.capture.options.slot_name,),
        ).fetchone()
        pubs = conn.execute(
            "SELECT count(*) FROM pg_publication WHERE pubname = %s",
            (scripted.capture.options.publication,),
        ).fetchone()
    assert slots == (0,)
    assert pubs == (0,)


def test_initial_snapshot_then_streaming(
    debezium_jvm: None, kafka_broker: Broker, postgres: PgDatabase, unique_name: str
) -> None:
    twins = oracle.create_twin_tables(postgres, "snap")
    rng = random.Random(5)
    before = oracle.Workload.of(
        *(oracle.insert_statement("insert", k, oracle.big_row(rng)) for k in (1, 2))
    )
    oracle.run_workload(postgres, twins, before)
    table = f"public.{twins.default}"
    options = BridgeOptions(tables=[table], snapshot_mode="initial", partitions=1)
    options.topic_map = {options.debezium_topic(table): unique_name}
    with DebeziumBridge(postgres, kafka_broker.bootstrap_servers, options) as bridge:
        bridge.wait_for(2, topic=unique_name)
        oracle.run_workload(
            postgres, twins, oracle.Workload.of(oracle.update_statement(1, {"small": 1}))
        )
        bridge.wait_for(3, topic=unique_name)
    records = oracle.consume_all(kafka_broker.bootstrap_servers, unique_name, expected=3)
    assert _ops(records) == ["r", "r", "u"]
    # the snapshot reads rows from the table, so its images are full even for TOASTed columns
    shapes = oracle.placeholder_shapes()
    assert not oracle.placeholder_columns(_value(records[0])["after"], shapes)
    assert not oracle.placeholder_columns(_value(records[1])["after"], shapes)
    assert oracle.placeholder_columns(_value(records[2])["after"], shapes) == list(shapes)


def test_a_connector_that_cannot_start_says_why(
    debezium_jvm: None, kafka_broker: Broker, postgres: PgDatabase
) -> None:
    options = BridgeOptions(
        tables=["public.absent"], extra_properties={"database.dbname": "no_such_database"}
    )
    with (
        pytest.raises(RuntimeError, match='database "no_such_database" does not exist'),
        DebeziumBridge(postgres, kafka_broker.bootstrap_servers, options),
    ):
        pass


def test_base64_mode_turns_an_unchanged_bytea_into_null(
    debezium_jvm: None, kafka_broker: Broker, postgres: PgDatabase
) -> None:
    """A Debezium 3.6 fact the hydrator cannot repair: with binary.handling.mode=base64 the
    unchanged TOASTed bytea arrives as null, not as a placeholder (and the twin shows the value)."""
    row = oracle.big_row(random.Random(3))
    workload = oracle.Workload.of(
        oracle.insert_statement("insert", 1, row), oracle.update_statement(1, {"small": 3})
    )
    cap = oracle.capture_twins(
        postgres,
        kafka_broker.bootstrap_servers,
        workload,
        "b64",
        binary_handling_mode="base64",
        partitions=1,
    )
    encoded = base64.b64encode(row["blob"]).decode()
    assert _value(cap.default[0])["after"]["blob"] == encoded
    update = _value(cap.default[1])["after"]
    assert update["blob"] is None
    assert oracle.placeholder_columns(update, oracle.placeholder_shapes("base64")) == [
        c for c in oracle.TOAST_COLUMNS if c != "blob"
    ]
    assert _value(cap.full[1])["after"]["blob"] == encoded


def test_a_capture_short_of_its_count_is_nudged_once_then_fails_saying_where_the_slot_is(
    debezium_jvm: None,
    kafka_broker: Broker,
    postgres: PgDatabase,
    unique_name: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    twins = oracle.create_twin_tables(postgres, "nudge")
    table = f"public.{twins.default}"
    options = BridgeOptions(tables=[table], partitions=1)
    options.topic_map = {options.debezium_topic(table): unique_name}
    with DebeziumBridge(postgres, kafka_broker.bootstrap_servers, options) as bridge:
        rng = random.Random(7)
        oracle.run_workload(
            postgres,
            twins,
            oracle.Workload.of(oracle.insert_statement("insert", 1, oracle.big_row(rng))),
        )
        bridge.wait_for(1, topic=unique_name)
        with caplog.at_level(logging.WARNING), pytest.raises(TimeoutError) as stalled:
            bridge.wait_for(2, topic=unique_name, timeout_s=4)
    assert "1 of 2 records produced, none more for 4s (nudged once)" in str(stalled.value)
    assert "confirmed flush" in str(stalled.value)
    assert [r.message for r in caplog.records if "nudging the WAL" in r.message]
