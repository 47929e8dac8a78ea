"""The bootstrap's row encoding equals Debezium's: real Debezium snapshot events (op `r`) of a
table with many column types, against `read_table` of the same rows, for the connector settings
the encoding depends on."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import pytest

from hydrator.bootstrap.postgres import read_table
from hydrator.postgres.debezium_values import ConnectorSettings
from tests.harness import oracle
from tests.harness.debezium import BridgeOptions, DebeziumBridge
from tests.harness.kafka import Broker
from tests.harness.postgres import PgDatabase

pytestmark = pytest.mark.integration

DDL = """
CREATE TABLE {t} (
    id integer PRIMARY KEY,
    i2 smallint, i8 bigint, f4 real, f8 double precision, ok boolean,
    n numeric(12,3), nv numeric, money_ money,
    t text, vc varchar(20), ch char(5), js json, jb jsonb, u uuid, ip inet, x xml,
    b bytea, d date, ts timestamp, ts3 timestamp(3), tz timestamptz, tz0 timestamptz(0),
    tm time, tm3 time(3),
    ta text[], ia integer[], ba bigint[], ua uuid[], byta bytea[], h hstore,
    r int4range
)"""

ROWS = [
    """INSERT INTO {t} VALUES (1, -3, 9007199254740993, 1.1, 0.1, true,
    -12345.678, 3.14159000, 12.34,
    'hello', 'v', 'ab', '{{"a": [1, 2]}}', '{{"z": 1, "a": {{"b": null}}}}',
    'b68a35a7-17ad-35b3-af2a-ae46edb4545a', '10.0.0.1/24', '<a>x</a>',
    '\\x00ff10', '2024-02-29', '2024-02-29 13:14:15.123456', '1969-12-31 23:59:59.5',
    '2024-02-29 13:14:15.1+02', '2024-02-29 13:14:15+00',
    '13:14:15.654321', '01:02:03.456',
    ARRAY['a', NULL, 'c"d'], ARRAY[1, -2], ARRAY[9223372036854775807],
    ARRAY['b68a35a7-17ad-35b3-af2a-ae46edb4545a'::uuid], ARRAY['\\x01'::bytea],
    'k1=>v1, "key two"=>NULL, zeta=>"a\\"b", alpha=>x, k10=>y', '[1,5)')""",
    "INSERT INTO {t} (id) VALUES (2)",
    """INSERT INTO {t} (id, n, nv, f8, tz, h, ta) VALUES (3, 0, -0.001, 1e300,
    '2000-01-01 00:00:00.000001+00', '', '{{}}')""",
    "INSERT INTO {t} (id, n, nv) VALUES (4, 100, 100)",
    "INSERT INTO {t} (id, n, nv) VALUES (5, -1, 12.50)",
]

SETTINGS: dict[str, Mapping[str, str]] = {
    "defaults": {},
    "string_hex_map": {
        "decimal.handling.mode": "string",
        "binary.handling.mode": "hex",
        "hstore.handling.mode": "map",
    },
    "double_micros": {
        "decimal.handling.mode": "double",
        "time.precision.mode": "adaptive_time_microseconds",
        "binary.handling.mode": "base64-url-safe",
    },
}


@pytest.mark.parametrize("name", list(SETTINGS))
def test_rows_equal_debezium_snapshot_events(
    debezium_jvm: None, kafka_broker: Broker, postgres: PgDatabase, name: str
) -> None:
    table = f"types_{uuid.uuid4().hex[:6]}"
    with postgres.connect() as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS hstore")
        conn.execute(DDL.format(t=table))
        for row in ROWS:
            conn.execute(row.format(t=table))
    qualified = f"public.{table}"
    options = BridgeOptions(
        tables=[qualified],
        snapshot_mode="initial",
        partitions=1,
        extra_properties=dict(SETTINGS[name]),
    )
    topic = options.broker_topic(qualified)
    with DebeziumBridge(postgres, kafka_broker.bootstrap_servers, options) as bridge:
        bridge.wait_for(len(ROWS), topic=topic, timeout_s=120)
    events = oracle.consume_all(kafka_broker.bootstrap_servers, topic, expected=len(ROWS))
    debezium = {}
    for record in events:
        payload = oracle.payload(record.value)
        assert payload["op"] == "r"
        debezium[payload["after"]["id"]] = payload["after"]

    settings = ConnectorSettings.from_config({**options_settings(bridge), **SETTINGS[name]})
    ours: dict[int, dict[str, Any]] = {}
    for rows in read_table(postgres.dsn, qualified, settings):
        assert rows.key_columns == ["id"]
        ours = {row["id"]: row for row in rows.rows}
    assert set(ours) == set(debezium)
    for key, after in debezium.items():
        differences = {
            c: (ours[key].get(c, "<absent>"), v)
            for c, v in after.items()
            if ours[key].get(c, "<absent>") != v
        }
        assert not differences, f"row {key}: ours vs Debezium {differences}"
        assert list(ours[key]) == list(after)


def options_settings(bridge: DebeziumBridge) -> dict[str, str]:
    return bridge.properties()
