"""`hydrator dev capture`'s pure parts: the table name it takes, the topic it writes and the
connector settings it runs Debezium with (the project's shared ones, so what the hydrator reads
from it is what the tests and the demo run)."""

from __future__ import annotations

import pytest

from hydrator.demo.connector import shared_settings
from hydrator.dev.capture import (
    ENVELOPES,
    CaptureOptions,
    Database,
    TableName,
    connector_properties,
    run_command,
    topic_for,
)
from tests.harness.readme import readme_commands

DATABASE = Database("127.0.0.1", 5432, "postgres", "", "app")


def test_table_names() -> None:
    assert TableName.parse("public.customers") == TableName("public", "customers")
    assert TableName.parse("customers") == TableName("public", "customers")
    assert str(TableName.parse("sales.orders")) == "sales.orders"


@pytest.mark.parametrize("bad", ["a.b.c", "", "public.", "1abc", "public.my table", 'x."y"'])
def test_table_names_refused(bad: str) -> None:
    with pytest.raises(ValueError, match=r"schema\.table"):
        TableName.parse(bad)


def test_topic_is_debeziums_name() -> None:
    assert topic_for("dev", TableName("public", "customers")) == "dev.public.customers"


def _options(**kwargs: object) -> CaptureOptions:
    return CaptureOptions(
        dsn="", table=TableName("public", "customers"), bootstrap_servers="b:1", **kwargs
    )


def test_properties_start_from_the_shared_settings() -> None:
    properties = connector_properties(_options(), DATABASE)
    for name, value in shared_settings().items():
        assert properties[name] == value
    # the placeholder the hydrator expects is Debezium's default: nothing may change it
    assert "unavailable.value.placeholder" not in properties
    assert properties["binary.handling.mode"] == "bytes"


def test_properties_name_this_capture() -> None:
    options = _options(topic_prefix="mine", snapshot=False)
    properties = connector_properties(options, DATABASE)
    assert properties["table.include.list"] == "public.customers"
    assert properties["topic.prefix"] == "mine"
    assert properties["database.dbname"] == "app"
    assert properties["slot.name"] == options.slot
    assert properties["slot.drop.on.stop"] == "true"
    assert properties["publication.name"] == f"{options.slot}_pub"
    assert properties["snapshot.mode"] == "no_data"
    assert connector_properties(_options(), DATABASE)["snapshot.mode"] == "initial"


def test_each_capture_has_its_own_slot() -> None:
    assert _options().slot != _options().slot
    assert _options().slot.startswith("hydrator_dev_")


def test_json_is_an_envelope() -> None:
    assert "json" in ENVELOPES


def test_capture_prints_the_run_command_the_readme_shows() -> None:
    (readme_run,) = readme_commands("A dev loop on your own table", "run")
    options = CaptureOptions("dbname=app", TableName("public", "customers"), "127.0.0.1:9092")
    assert run_command(options) == readme_run
