"""The lines a newcomer reads first: the counts of a progress or totals line in words, the
one line of a run that dead-lettered too much, and the Spark driver's loopback default."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hydrator.metrics.count_line import describe_counts, headline_counts, shown_counts
from hydrator.metrics.dead_letter_ratio import (
    EXIT_TOO_MANY_DEAD_LETTERS,
    TooManyDeadLetters,
    check_dead_letters,
    too_many_dead_letters,
)


def test_the_headline_counts_show_even_at_zero_then_the_rest_in_the_list_s_order() -> None:
    counts = {"passthrough": 2, "events": 12, "dead_letters": 1, "stale_dropped": 0}
    assert describe_counts(counts) == (
        "events 12, filled columns 0, unresolved events 0, dead letters 1, passthrough 2"
    )
    assert describe_counts({"records": 5}, ("records", "events")) == "records 5, events 0"


def test_a_signed_change_is_not_a_count_and_never_shows() -> None:
    line = describe_counts({"events": 3, "state_bytes": -1, "parked_keys": -2})
    assert "state" not in line and "-" not in line and "{" not in line


def test_headline_counts_are_fields_for_a_json_line() -> None:
    assert headline_counts({"filled_columns": 4}) == {
        "events": 0,
        "filled_columns": 4,
        "unresolved_events": 0,
        "dead_letters": 0,
    }


@given(st.dictionaries(st.sampled_from(["events", "dead_letters", "passthrough"]), st.integers(0)))
def test_shown_counts_keep_every_non_zero_count(counts: dict[str, int]) -> None:
    shown = shown_counts(counts)
    assert all(shown[name] == n for name, n in counts.items() if n)


@pytest.mark.parametrize(
    ("records", "dead", "ratio", "fails"),
    [
        (87, 87, 0.5, True),
        (100, 51, 0.5, True),
        (100, 50, 0.5, False),  # "more than" the ratio
        (100, 100, 0, False),  # 0 turns the check off
        (0, 0, 0.5, False),  # nothing read
        (10, 2, 0.1, True),
    ],
)
def test_the_dead_letter_ratio(records: int, dead: int, ratio: float, fails: bool) -> None:
    line = too_many_dead_letters(records, dead, ratio)
    assert (line is not None) == fails
    if line is not None:
        assert f"{dead} of {records} records read" in line and "--max-dlq-ratio" in line
        assert "\n" not in line


def test_too_many_dead_letters_logs_one_line_and_exits_65(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with pytest.raises(TooManyDeadLetters) as raised:
        check_dead_letters(87, 87, 0.5)
    assert raised.value.code == EXIT_TOO_MANY_DEAD_LETTERS == 65
    assert len(caplog.records) == 1 and "87 of 87 records read (100%)" in caplog.text
    check_dead_letters(87, 1, 0.5)  # fine: nothing raised


@pytest.mark.parametrize(
    ("master", "conf", "env", "expected"),
    [
        ("local[*]", {}, {}, "127.0.0.1"),
        ("local[2]", {}, {}, "127.0.0.1"),
        ("local", {}, {}, "127.0.0.1"),
        ("spark://host:7077", {}, {}, None),
        ("local[*]", {"spark.driver.host": "10.0.0.5"}, {}, None),
        ("local[*]", {"spark.driver.bindAddress": "0.0.0.0"}, {}, None),
        ("local[*]", {}, {"SPARK_LOCAL_IP": "10.0.0.5"}, None),
        ("", {}, {}, None),  # spark-submit chose the master
    ],
)
def test_a_local_master_listens_on_loopback_unless_told_otherwise(
    monkeypatch: pytest.MonkeyPatch,
    master: str,
    conf: dict[str, str],
    env: dict[str, str],
    expected: str | None,
) -> None:
    pytest.importorskip("pyspark")
    from hydrator.engines.spark.session import loopback_defaults

    monkeypatch.delenv("SPARK_LOCAL_IP", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = loopback_defaults(master, conf)
    if expected is None:
        assert settings == {}
    else:
        assert settings == {"spark.driver.host": expected, "spark.driver.bindAddress": expected}
        import os

        assert os.environ["SPARK_LOCAL_IP"] == expected


def test_state_inspect_cuts_long_values_and_says_how_long_they_are() -> None:
    from hydrator.ops.state_tools import KeyState, shortened

    doc = "x" * 8000
    state = KeyState(0, "t", '{"id":1}', 9000, image={"id": 1, "doc": doc, "tags": [doc]})
    shown = state.to_dict(value_chars=200)
    assert shown["image"]["id"] == 1
    assert shown["image"]["doc"] == "x" * 200 + "… [8000 characters; --full-values shows all]"
    assert shown["image"]["tags"][0].endswith("[8000 characters; --full-values shows all]")
    assert state.to_dict()["image"]["doc"] == doc  # --full-values
    assert shortened("short", 200) == "short"


@pytest.mark.parametrize("events", [1, 10, 499, 500, 501, 2000])
def test_the_demo_publishes_exactly_the_events_asked_for(events: int) -> None:
    from hydrator.demo.debezium import _RECORDS, workload
    from hydrator.demo.stream import DemoStream

    assert len(DemoStream(seed=3, keys=max(10, events // 40)).records(events)) == events
    assert sum(_RECORDS[s.kind] for s in workload(events)) == events
