"""`hydrator config show`, where values come from, and every validation error of `run`: each one
exits 2 naming its option, whether the bad value came by flag, environment or config file."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from hydrator import cli
from hydrator.cli import launch
from hydrator.config import EmbeddedSettings, RunConfig, SparkSettings

REQUIRED = ["--bootstrap-servers", "h:1", "--input-topic", "t", "--output-suffix", ".e"]


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> list[RunConfig]:
    """Stop before any engine runs; keep the config it would have been given."""
    configs: list[RunConfig] = []

    def fake_embedded(config: RunConfig, embedded: EmbeddedSettings) -> int:
        configs.append(config)
        return 0

    def fake_spark(config: RunConfig, spark: SparkSettings) -> int:
        configs.append(config)
        return 0

    monkeypatch.setattr(launch, "run_embedded", fake_embedded)
    monkeypatch.setattr(launch, "run_spark", fake_spark)
    for param in cli.run.params:
        if isinstance(param.envvar, str):
            monkeypatch.delenv(param.envvar, raising=False)
    return configs


def invoke(args: list[str], env: dict[str, str] | None = None):
    return CliRunner().invoke(cli.cli, args, env=env, catch_exceptions=False)


def shown(output: str) -> dict[str, tuple[object, str]]:
    """`config show` output -> {option: (value, source)}; unset options have value None."""
    result = {}
    for line in output.splitlines():
        if line.startswith("# ") and " = (not set)" in line:
            name = line[2:].split(" = ", 1)[0]
            result[name] = (None, line.rsplit("# ", 1)[1])
        elif " = " in line and not line.startswith("#"):
            body, source = line.rsplit("  # ", 1)
            result.update({k: (v, source) for k, v in tomllib.loads(body).items()})
    return result


# -- the engine default --------------------------------------------------------------------------


def test_the_embedded_engine_is_the_default(
    runs: list[RunConfig], monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[str] = []
    monkeypatch.setattr(launch, "run_embedded", lambda *given: started.append("embedded") or 0)
    monkeypatch.setattr(launch, "run_spark", lambda *given: started.append("spark") or 0)
    assert invoke(["run", *REQUIRED]).exit_code == 0
    assert invoke(["run", "--engine", "spark", *REQUIRED]).exit_code == 0
    assert invoke(["run", *REQUIRED], env={"HYDRATOR_ENGINE": "spark"}).exit_code == 0
    assert started == ["embedded", "spark", "spark"]


# -- config show ---------------------------------------------------------------------------------


def test_config_show_names_the_source_of_every_value(runs: list[RunConfig], tmp_path: Path) -> None:
    file = tmp_path / "run.toml"
    file.write_text(
        '[run]\nbootstrap-servers = "file:1"\ninput-topic = ["a", "b"]\noutput-topic = "out"\n'
        'handoff-timeout = "5s"\napplication-id = "from-file"\nmax-parked-bytes = "64KB"\n'
    )
    env = {"HYDRATOR_BOOTSTRAP_SERVERS": "env:1", "HYDRATOR_APPLICATION_ID": "from-env"}
    args = ["--config", str(file), "--application-id", "from-flag", "--state-ttl", "7d"]
    result = invoke(["config", "show", *args], env=env)
    assert result.exit_code == 0, result.output
    settings = shown(result.output)
    assert settings["application-id"] == ("from-flag", "flag")
    assert settings["bootstrap-servers"] == ("env:1", "env HYDRATOR_BOOTSTRAP_SERVERS")
    assert settings["input-topic"] == (["a", "b"], f"file {file}")
    assert settings["handoff-timeout"] == ("5s", f"file {file}")
    assert settings["max-parked-bytes"] == ("64KB", f"file {file}")
    assert settings["state-ttl"] == ("7d", "flag")
    assert settings["engine"] == ("embedded", "default")
    assert settings["tombstone-retention"] == ("1d", "default")
    assert settings["output-suffix"] == (None, "default")
    assert f"# config file: {file} (flag)" in result.output
    # and it is what `run` gets from the same sources
    assert invoke(["run", *args], env=env).exit_code == 0
    assert runs[-1].application_id == "from-flag"
    assert runs[-1].kafka.bootstrap_servers == "env:1"
    assert runs[-1].hydration.handoff_timeout_ms == 5000


def test_config_show_reads_back_as_a_config_file(runs: list[RunConfig], tmp_path: Path) -> None:
    args = [*REQUIRED, "--input-topic", "u,v", "--on-unresolved", "dlq", "--no-fill-before"]
    first = invoke(["config", "show", *args])
    assert first.exit_code == 0, first.output
    file = tmp_path / "shown.toml"
    file.write_text(first.output)
    assert invoke(["run", "--config", str(file)]).exit_code == 0
    assert invoke(["run", *args]).exit_code == 0
    from_file, from_flags = runs
    assert from_file == from_flags
    assert from_file.input_topics == ("t", "u", "v")


SECRET = "hunter2-Secret"


@pytest.mark.parametrize(
    ("args", "env", "hidden"),
    [
        (["-X", f"sasl.password={SECRET}"], {}, SECRET),
        ([], {"HYDRATOR_KAFKA_PROPERTY": f"consumer.ssl.key.password={SECRET}"}, SECRET),
        (["-X", f"sasl.jaas.config=x password='{SECRET}';"], {}, SECRET),
        (["-X", f"my.client.secret={SECRET}"], {}, SECRET),
        (["-X", f"ssl.key.pem={SECRET}"], {}, SECRET),
        (["--spark-conf", f"spark.hadoop.fs.s3a.secret.key={SECRET}"], {}, SECRET),
        (["--spark-conf", f"spark.ssl.keyPassword={SECRET}"], {}, SECRET),
        (["--master", f"spark://admin:{SECRET}@head:7077"], {}, SECRET),
        ([], {"HYDRATOR_BOOTSTRAP_SERVERS": f"SASL_SSL://svc:{SECRET}@k:9093"}, SECRET),
        (["--reselect", f"postgresql://app:{SECRET}@db:5432/shop"], {}, SECRET),
        ([], {"HYDRATOR_RESELECT": f"host=db dbname=shop password={SECRET}"}, SECRET),
        (["--reselect", f"host=db password='{SECRET}' user=app"], {}, SECRET),
    ],
)
def test_config_show_masks_every_secret_looking_value(
    runs: list[RunConfig], args: list[str], env: dict[str, str], hidden: str
) -> None:
    result = invoke(["config", "show", *REQUIRED, *args], env=env)
    assert result.exit_code == 0, result.output
    assert hidden not in result.output
    assert "***" in result.output


def test_the_spark_engine_takes_reselect_and_its_password_stays_masked(
    runs: list[RunConfig],
) -> None:
    args = [*REQUIRED, "--engine", "spark", "--reselect-max-qps", "8"]
    env = {"HYDRATOR_RESELECT": f"postgresql://app:{SECRET}@db:5432/shop"}
    shown_config = invoke(["config", "show", *args], env=env)
    assert shown_config.exit_code == 0, shown_config.output
    assert SECRET not in shown_config.output and "***" in shown_config.output
    result = invoke(["run", *args], env=env)
    assert result.exit_code == 0, result.output
    (config,) = runs
    assert config.reselect is not None
    assert config.reselect.max_qps == 8 and config.reselect.target() == "db:5432/shop"


def test_config_show_keeps_what_is_not_secret(runs: list[RunConfig]) -> None:
    args = ["-X", "consumer.fetch.wait.max.ms=20", "-X", "security.protocol=SASL_SSL"]
    result = invoke(["config", "show", *REQUIRED, *args])
    assert result.exit_code == 0, result.output
    (properties, _) = shown(result.output)["kafka-property"]
    assert properties == ["consumer.fetch.wait.max.ms=20", "security.protocol=SASL_SSL"]


# -- every validation error, from every source ----------------------------------------------------

# (option, a value it refuses); each must be refused naming the option, exit 2.
BAD_VALUES = [
    ("engine", "flink"),
    ("bootstrap-servers", ""),
    ("input-topic", " , "),
    ("state-dir", "FILE"),  # an existing file, not a directory
    ("application-id", "a/b"),
    ("format", "xml"),
    ("available-now", "perhaps"),
    ("reselect-max-qps", "0"),
    ("reselect-timeout", "soon"),
    ("kafka-property", "no-equals-sign"),
    ("kafka-property", "isolation.level=read_uncommitted"),
    ("placeholder", "hex:zz"),
    ("fill-before", "perhaps"),
    ("on-stale", "sometimes"),
    ("on-unresolved", "explode"),
    ("tombstone-retention", "soon"),
    ("handoff-timeout", "10 parsecs"),
    ("state-ttl", "-1s"),
    ("max-record-bytes", "lots"),
    ("max-parked-records", "0"),
    ("max-parked-records", "many"),
    ("max-parked-bytes", "1TB"),
    ("state-cache-bytes", "-5"),
    ("commit-interval", "often"),
    ("progress-interval", "1 fortnight"),
    ("startup-timeout", "forever"),
    ("spark-conf", "spark.sql.shuffle.partitions"),
    ("spark-conf", "=8"),
    ("max-offsets-per-trigger", "0"),
    ("log-level", "LOUD"),
    ("log-format", "xml"),
]
FLAGS = {"available-now", "fill-before"}  # no value on the command line


def _bad_invocation(
    option: str, value: str, source: str, tmp_path: Path
) -> tuple[list[str], dict[str, str]]:
    if value == "FILE":
        value = str(tmp_path / "a-file")
        Path(value).write_text("")
    base = ["--engine", "spark"] if option in ("spark-conf", "max-offsets-per-trigger") else []
    required = {"bootstrap-servers": "h:1", "input-topic": "t", "output-suffix": ".e"}
    required.pop(option, None)
    args = [*base, *(item for name, v in required.items() for item in (f"--{name}", v))]
    env_name = "HYDRATOR_" + option.upper().replace("-", "_")
    if source == "flag":
        return [*args, f"--{option}", value], {}
    if source == "env":
        return args, {env_name: value}
    file = tmp_path / "bad.toml"
    file.write_text(f"{option} = {json.dumps(value)}\n")
    return [*args, "--config", str(file)], {}


@pytest.mark.parametrize("command", [["run"], ["config", "show"]])
@pytest.mark.parametrize(
    ("source", "option", "value"),
    [
        (source, option, value)
        for source in ("flag", "env", "file")
        for option, value in BAD_VALUES
        if not (source == "flag" and option in FLAGS)
    ],
)
def test_every_bad_value_is_exit_2_naming_its_option(
    runs: list[RunConfig],
    tmp_path: Path,
    command: list[str],
    source: str,
    option: str,
    value: str,
) -> None:
    args, env = _bad_invocation(option, value, source, tmp_path)
    result = invoke([*command, *args], env=env)
    assert result.exit_code == 2, result.output
    assert f"--{option}" in result.output, result.output
    assert runs == []


@pytest.mark.parametrize("command", [["run"], ["config", "show"]])
@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ([], "--bootstrap-servers"),  # missing
        (["--bootstrap-servers", "h:1"], "--input-topic"),  # missing
        (["--bootstrap-servers", "h:1", "--input-topic", "t"], "--output-topic"),  # neither
    ],
)
def test_a_missing_option_is_exit_2_naming_it(
    runs: list[RunConfig], command: list[str], extra: list[str], named: str
) -> None:
    result = invoke([*command, *extra])
    assert result.exit_code == 2
    assert named in result.output


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (None, "cannot read config file"),
        ("bootstrap-servers = ", "not valid TOML"),
        ("run = 3", "[run] is not a table"),
    ],
)
def test_a_bad_config_file_is_exit_2_naming_config(
    runs: list[RunConfig], tmp_path: Path, content: str | None, why: str
) -> None:
    file = tmp_path / "run.toml"
    if content is not None:
        file.write_text(content + "\n")
    for command in (["run"], ["config", "show"]):
        result = invoke([*command, *REQUIRED, "--config", str(file)])
        assert result.exit_code == 2
        assert "--config" in result.output and why in result.output
    assert runs == []
