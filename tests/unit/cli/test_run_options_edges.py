"""Option edges: the application id cannot leave --state-dir, -X never shows a value, secrets
work through the environment and the config file, and an unusable --state-dir is exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hydrator.cli import launch
from hydrator.config import RunConfig
from hydrator.engines.embedded.state_dir import StateDirectory, StateDirUnusable
from hydrator.kafka.client_config import client_error, split_env_properties
from tests.unit.cli.run_cli import BASE, invoke

SECRET = "s3cr3t pass=word"


# -- the application id --------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["../../x", "..", ".", "a/b", "a b", "", "x\x00y", "é"])
@pytest.mark.parametrize("source", ["option", "env", "file"])
def test_an_application_id_that_could_escape_the_state_dir_is_exit_2(
    captured: list[RunConfig], tmp_path: Path, bad: str, source: str
) -> None:
    if source == "option":
        result = invoke([*BASE, "--application-id", bad])
    elif source == "env":
        if "\x00" in bad or not bad:
            pytest.skip("an environment variable cannot hold NUL; an empty one is unset")
        result = invoke(BASE, env={"HYDRATOR_APPLICATION_ID": bad})
    else:
        config = tmp_path / "run.toml"
        config.write_text(f"application-id = {json.dumps(bad)}\n")
        result = invoke([*BASE, "--config", str(config)])
    assert result.exit_code == 2, result.output
    assert "--application-id" in result.output
    assert not captured


@pytest.mark.parametrize("good", ["toast-hydrator", "orders.v2", "A_b-9", "..x", "x.."])
def test_plain_application_ids_are_accepted(captured: list[RunConfig], good: str) -> None:
    result = invoke([*BASE, "--application-id", good])
    assert result.exit_code == 0, result.output
    assert captured[0].application_id == good


# -- secrets in -X -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "items",
    [
        ["sasl.password"],  # no '=': the value may have been typed as the name
        [SECRET],
        ["ok.name=1", SECRET],
        ["=" + SECRET],
        ["sasl password=" + SECRET],
        ["consumer.sasl.password " + SECRET + "=x"],
    ],
)
def test_a_malformed_property_never_shows_its_value(
    captured: list[RunConfig], items: list[str]
) -> None:
    args = [*BASE]
    for item in items:
        args += ["-X", item]
    result = invoke(args)
    assert result.exit_code == 2
    assert "--kafka-property" in result.output
    for fragment in ("s3cr3t", "word", "sasl.password"):
        assert fragment not in result.output
    assert not captured


def test_a_value_librdkafka_rejects_is_not_shown() -> None:
    reason = 'Invalid value "s3cr3t" for configuration property "security.protocol"'
    message = str(client_error(reason, {"security.protocol": "s3cr3t"}))
    assert "s3cr3t" not in message
    assert "security.protocol" in message
    other = str(client_error('No such property "x" (was hunter22)', {"x": "hunter22"}))
    assert "hunter22" not in other


def test_secrets_through_the_environment(captured: list[RunConfig]) -> None:
    # On one line a value may hold spaces, as long as no part of it looks like `name=`.
    env = {"HYDRATOR_KAFKA_PROPERTY": "security.protocol=SASL_SSL sasl.password=two  words"}
    assert invoke(BASE, env=env).exit_code == 0
    assert captured[0].kafka.properties == {
        "security.protocol": "SASL_SSL",
        "sasl.password": "two  words",
    }


def test_secrets_through_the_environment_one_per_line(captured: list[RunConfig]) -> None:
    env = {"HYDRATOR_KAFKA_PROPERTY": f"sasl.password={SECRET}\nsasl.username=me\n"}
    assert invoke(BASE, env=env).exit_code == 0
    assert captured[0].kafka.properties == {"sasl.password": SECRET, "sasl.username": "me"}


@pytest.mark.parametrize("shape", ["list", "string"])
def test_secrets_through_the_config_file(
    captured: list[RunConfig], tmp_path: Path, shape: str
) -> None:
    config = tmp_path / "run.toml"
    if shape == "list":
        config.write_text(f'[run]\nkafka-property = ["sasl.password={SECRET}", "a.b=1"]\n')
    else:
        config.write_text(f'kafka-property = """\nsasl.password={SECRET}\na.b=1\n"""\n')
    assert invoke([*BASE, "--config", str(config)]).exit_code == 0
    assert captured[0].kafka.properties == {"sasl.password": SECRET, "a.b": "1"}


def test_the_command_line_wins_over_environment_secrets(captured: list[RunConfig]) -> None:
    env = {"HYDRATOR_KAFKA_PROPERTY": "sasl.password=from-env"}
    assert invoke([*BASE, "-X", "sasl.username=u"], env=env).exit_code == 0
    assert captured[0].kafka.properties == {"sasl.username": "u"}


def test_env_property_splitting() -> None:
    assert split_env_properties("") == []
    assert split_env_properties("a=1 b.c=x y") == ["a=1", "b.c=x y"]
    assert split_env_properties("a=1\n\n b=2 3 \n") == ["a=1", "b=2 3"]


# -- the state directory -----------------------------------------------------------------------


def test_an_unusable_state_dir_is_a_configuration_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(StateDirUnusable, match="--state-dir"):
        StateDirectory(blocker / "state", "app").lock()


@pytest.mark.parametrize("uri", ["s3a://bucket/state", "hdfs://nn:8020/state", "file://host/x"])
def test_the_embedded_engine_refuses_a_state_dir_uri(captured: list[RunConfig], uri: str) -> None:
    result = invoke([*BASE, "--state-dir", uri])
    assert result.exit_code == 2
    assert "--state-dir" in result.output and uri in result.output
    assert "local" in result.output and not captured


@pytest.mark.parametrize(
    ("given", "path"),
    [
        ("file:///var/lib/h", "/var/lib/h"),
        ("file:/var/lib/h", "/var/lib/h"),
        ("rel/dir", "rel/dir"),
    ],
)
def test_the_embedded_engine_takes_a_path_or_a_file_uri(
    captured: list[RunConfig], monkeypatch: pytest.MonkeyPatch, given: str, path: str
) -> None:
    state_dirs: list[Path] = []
    monkeypatch.setattr(
        launch, "run_embedded", lambda config, embedded: state_dirs.append(embedded.state_dir) or 0
    )
    assert invoke([*BASE, "--state-dir", given]).exit_code == 0
    assert state_dirs[0] == Path(path)


def test_the_spark_engine_keeps_a_state_dir_uri_as_given(monkeypatch: pytest.MonkeyPatch) -> None:
    state_dirs: list[Path | str] = []
    monkeypatch.setattr(
        launch, "run_spark", lambda config, spark: state_dirs.append(spark.state_dir) or 0
    )
    spark = [*BASE[:2], "spark", *BASE[3:]]
    assert invoke([*spark, "--state-dir", "s3a://bucket/state"]).exit_code == 0
    assert state_dirs[0] == "s3a://bucket/state"


def test_the_checkpoint_of_a_path_is_a_local_uri_and_a_uri_stays_on_its_filesystem(
    tmp_path: Path,
) -> None:
    from hydrator.engines.spark.checkpoint_dir import checkpoint_location

    assert checkpoint_location(tmp_path, "app") == f"file://{tmp_path}/app/checkpoint"
    assert checkpoint_location("s3a://b/dir/", "app") == "s3a://b/dir/app/checkpoint"
    assert checkpoint_location("file:///x", "app") == "file:///x/app/checkpoint"
