"""Configuration that says what it did: a `HYDRATOR_*` variable or a config-file key no option
reads is named in a warning, top-level keys and a `[run]` table are one set, a string stands for a
list of one, and an error about a value that came from the environment or the file says so.
Driven as a user does: `python -m hydrator.cli` in a process, or through the CLI's entry point."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from hydrator import cli
from hydrator.cli import launch
from hydrator.cli.environment import unknown_variables, unknown_variables_warning
from hydrator.config import EmbeddedSettings, RunConfig, SparkSettings

ROOT = Path(__file__).resolve().parents[3]
REQUIRED = ["--bootstrap-servers", "h:1", "--input-topic", "t", "--output-suffix", ".e"]


def hydrator(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`hydrator ARGS` in a process of its own, with only `env`'s HYDRATOR_* variables."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("HYDRATOR_")}
    environ["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-m", "hydrator.cli", *args],
        capture_output=True,
        text=True,
        env={**environ, **(env or {})},
        timeout=120,
    )


@pytest.fixture
def runs(
    monkeypatch: pytest.MonkeyPatch,
) -> list[tuple[RunConfig, EmbeddedSettings | SparkSettings]]:
    """Stop before any engine runs; keep what it would have been given."""
    given: list[tuple[RunConfig, EmbeddedSettings | SparkSettings]] = []
    monkeypatch.setattr(
        launch, "run_embedded", lambda config, embedded: given.append((config, embedded)) or 0
    )
    monkeypatch.setattr(
        launch, "run_spark", lambda config, spark: given.append((config, spark)) or 0
    )
    for name in list(os.environ):
        if name.startswith("HYDRATOR_"):
            monkeypatch.delenv(name)
    return given


def invoke(args: list[str], env: dict[str, str] | None = None):
    return CliRunner().invoke(cli.cli, args, env=env, catch_exceptions=False)


# -- unknown HYDRATOR_* variables -----------------------------------------------------------------


def test_a_misspelled_variable_is_named_once_with_the_one_meant() -> None:
    done = hydrator(
        "config",
        "show",
        *REQUIRED,
        env={"HYDRATOR_WOKERS": "2", "HYDRATOR_BOOTSTRAP_SERVER": "secret-host:1"},
    )
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("Warning")]
    assert warnings == [
        "Warning: ignoring HYDRATOR_BOOTSTRAP_SERVER (did you mean HYDRATOR_BOOTSTRAP_SERVERS?), "
        "HYDRATOR_WOKERS (did you mean HYDRATOR_WORKERS?): no option reads them"
    ]
    assert "secret-host" not in done.stderr + done.stdout  # names only, never values
    assert "Warning" not in done.stdout  # config show's output stays a TOML file


def test_a_misspelled_variable_is_named_before_the_option_it_leaves_missing() -> None:
    done = hydrator(
        "run",
        "--input-topic",
        "t",
        "--output-suffix",
        ".e",
        env={"HYDRATOR_BOOTSTRAP_SERVER": "k:1"},
    )
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert lines[0].startswith("Warning: ignoring HYDRATOR_BOOTSTRAP_SERVER (did you mean")
    assert "Missing option '--bootstrap-servers'" in lines[-1]


def test_variables_that_options_or_other_programs_read_are_not_warned() -> None:
    done = hydrator(
        "config",
        "show",
        env={
            "HYDRATOR_BOOTSTRAP_SERVERS": "k:1",
            "HYDRATOR_INPUT_TOPIC": "t",
            "HYDRATOR_OUTPUT_SUFFIX": ".e",
            "HYDRATOR_DEMO_SOURCE": "generated",  # hydrator demo's
            "HYDRATOR_LIVE_PORT": "8000",  # python -m hydrator.live's
        },
    )
    assert done.returncode == 0, done.stderr
    assert "Warning" not in done.stderr


def test_unknown_variables_are_the_prefixed_names_nothing_reads() -> None:
    known = {"HYDRATOR_WORKERS", "HYDRATOR_CONFIG"}
    environ = {"HYDRATOR_WORKERS": "1", "HYDRATOR_X": "", "PATH": "/bin", "HYDRATOR_TEST_A": "1"}
    assert unknown_variables(environ, known) == ["HYDRATOR_X"]
    assert unknown_variables_warning({"HYDRATOR_WORKERS": "1"}, known) is None
    assert unknown_variables_warning({"HYDRATOR_CONFG": "x"}, known) == (
        "Warning: ignoring HYDRATOR_CONFG (did you mean HYDRATOR_CONFIG?): no option reads it"
    )


# -- the config file -------------------------------------------------------------------------------


def test_top_level_keys_and_the_run_table_are_one_set(runs: list, tmp_path: Path) -> None:
    file = tmp_path / "run.toml"
    file.write_text(
        'bootstrap-servers = "k:1"\nworkers = 3\n\n'
        '[run]\ninput-topic = ["a"]\noutput-suffix = ".e"\n'
    )
    result = invoke(["run", "--config", str(file)])
    assert result.exit_code == 0, result.output
    config, embedded = runs[0]
    assert config.kafka.bootstrap_servers == "k:1"
    assert (embedded.workers, config.input_topics) == (3, ("a",))


def test_a_key_both_at_top_level_and_under_run_is_exit_2_naming_it(
    runs: list, tmp_path: Path
) -> None:
    file = tmp_path / "run.toml"
    file.write_text('bootstrap-servers = "k:1"\n[run]\nbootstrap_servers = "k:2"\n')
    for command in (["run"], ["config", "show"]):
        result = invoke([*command, "--config", str(file), *REQUIRED[2:]])
        assert result.exit_code == 2
        assert "bootstrap-servers set both at top level and under [run]" in result.output
    assert runs == []


def test_a_table_beside_run_is_warned_as_unknown(runs: list, tmp_path: Path) -> None:
    """Before, a `[spark]` table beside `[run]` was ignored without a word."""
    file = tmp_path / "run.toml"
    file.write_text(
        '[spark]\nmaster = "local[2]"\n[rnu]\nworkers = 2\n[run]\nbootstrap-servers = "k:1"\n'
    )
    result = invoke(["run", "--config", str(file), *REQUIRED[2:]])
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        f"Warning: ignoring [spark], [rnu] (did you mean [run]?) in {file}: no option reads them"
    ]
    (config, engine) = runs[0]
    assert config.kafka.bootstrap_servers == "k:1" and isinstance(engine, EmbeddedSettings)


def test_every_unknown_key_is_named_in_one_warning_and_the_run_goes_on(
    runs: list, tmp_path: Path
) -> None:
    file = tmp_path / "run.toml"
    file.write_text('workers = 3\n[run]\nhandof-timeout = "5s"\nworkerz = 2\ncolour = "red"\n')
    result = invoke(["run", "--config", str(file), *REQUIRED])
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        "Warning: ignoring handof-timeout (did you mean handoff-timeout?), workerz (did you mean "
        f"workers?), colour in {file}: no option reads them"
    ]
    (config, embedded) = runs[0]
    assert embedded.workers == 3  # the keys it knows are taken
    assert config.hydration.handoff_timeout_ms == 60_000


def test_an_unknown_key_is_warned_before_the_command_runs_and_never_its_value(
    tmp_path: Path,
) -> None:
    file = tmp_path / "run.toml"
    file.write_text('bootstrap-servers = "k:1"\nsasl-pasword = "hunter2"\n')
    done = hydrator("config", "show", "--config", str(file), *REQUIRED[2:])
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        f"Warning: ignoring sasl-pasword in {file}: no option reads it"
    ]
    assert "hunter2" not in done.stderr + done.stdout
    assert "Warning" not in done.stdout  # config show's output stays a TOML file


def test_an_unknown_key_and_a_key_set_twice_is_still_exit_2(runs: list, tmp_path: Path) -> None:
    file = tmp_path / "run.toml"
    file.write_text('colour = "red"\nworkers = 2\n[run]\nworkers = 3\n')
    result = invoke(["run", "--config", str(file), *REQUIRED])
    assert result.exit_code == 2
    assert "workers set both at top level and under [run]" in result.output
    assert runs == []


@pytest.mark.parametrize("tool", [["state", "stats"], ["state", "bootstrap", "--input-topic", "t"]])
def test_the_state_tools_warn_of_the_run_file_s_unknown_keys_too(
    tmp_path: Path, tool: list[str]
) -> None:
    """They read a file written for `run`: a key `run` does not know is warned; one it knows and
    they do not use is left alone."""
    file = tmp_path / "run.toml"
    file.write_text(
        'state-dir = "nowhere"\nworkers = 2\nbootstrap-servers = "127.0.0.1:1"\nstate_dri = "x"\n'
    )
    done = hydrator(*tool, "--config", str(file))
    lines = done.stderr.splitlines()
    assert lines[0] == (
        f"Warning: ignoring state-dri (did you mean state-dir?) in {file}: no option reads it"
    )
    assert "Warning" not in "\n".join(lines[1:])


@pytest.mark.parametrize("placement", ["", "[run]\n"])
def test_a_string_stands_for_a_list_of_one(runs: list, tmp_path: Path, placement: str) -> None:
    file = tmp_path / "run.toml"
    file.write_text(
        f'{placement}engine = "spark"\nbootstrap-servers = "k:1"\ninput-topic = "orders"\n'
        'output-suffix = ".e"\nspark-conf = "spark.sql.shuffle.partitions=4"\n'
        'kafka-property = "client.id=x"\n'
    )
    result = invoke(["run", "--config", str(file)])
    assert result.exit_code == 0, result.output
    config, spark = runs[0]
    assert config.input_topics == ("orders",)
    assert dict(config.kafka.properties) == {"client.id": "x"}
    assert spark is not None and dict(spark.conf) == {"spark.sql.shuffle.partitions": "4"}


# -- where a bad value came from -------------------------------------------------------------------


def test_a_bad_value_from_the_environment_names_the_variable() -> None:
    done = hydrator("run", *REQUIRED, env={"HYDRATOR_WORKERS": "two"})
    assert done.returncode == 2
    assert "Invalid value for '--workers' (env HYDRATOR_WORKERS): 'two'" in done.stderr


@pytest.mark.parametrize(
    ("variable", "value", "option"),
    [
        ("HYDRATOR_KAFKA_PROPERTY", "no-equals-sign", "'-X' / '--kafka-property'"),
        ("HYDRATOR_STATE_DIR", "s3a://bucket/dir", "'--state-dir'"),
        ("HYDRATOR_HANDOFF_TIMEOUT", "soon", "'--handoff-timeout'"),
        ("HYDRATOR_FORMAT", "xml", "'--format'"),
    ],
)
def test_every_kind_of_bad_value_from_the_environment_names_the_variable(
    runs: list, variable: str, value: str, option: str
) -> None:
    for command in (["run"], ["config", "show"]):
        result = invoke([*command, *REQUIRED], env={variable: value})
        assert result.exit_code == 2
        assert f"Invalid value for {option} (env {variable}):" in result.output
    assert runs == []


def test_a_bad_value_from_the_file_names_the_file(runs: list, tmp_path: Path) -> None:
    file = tmp_path / "run.toml"
    file.write_text('workers = "two"\n')
    result = invoke(["run", "--config", str(file), *REQUIRED])
    assert result.exit_code == 2
    assert f"Invalid value for '--workers' (file {file}): 'two'" in result.output


def test_a_bad_value_on_the_command_line_is_reported_as_before(runs: list) -> None:
    result = invoke(["run", *REQUIRED, "--workers", "two"])
    assert result.exit_code == 2
    assert "Invalid value for '--workers': 'two'" in result.output
