"""`hydrator config show` masks a secret by what it is as well as by its name, and always writes a
TOML file that parses, whatever the values and the config file's path hold."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from hydrator import cli
from hydrator.ops.config_show import shown_path, toml_string
from hydrator.secrets import is_secret_name, mask_item, mask_value, secret_values

REQUIRED = ["--bootstrap-servers", "h:1", "--input-topic", "t", "--output-suffix", ".e"]
SECRET = "s3cr3t-VALUE-42"


@pytest.fixture(autouse=True)
def no_hydrator_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("HYDRATOR_"):
            monkeypatch.delenv(name)


def config_show(*args: str, env: dict[str, str] | None = None) -> str:
    result = CliRunner().invoke(cli.cli, ["config", "show", *args], env=env)
    assert result.exit_code == 0, result.output
    return result.stdout


# -- masking by name -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "spark.hadoop.fs.s3a.session.token",
        "spark.hadoop.fs.s3a.access.key",
        "spark.hadoop.fs.s3a.secret.key",
        "spark.hadoop.fs.s3a.encryption.key",
        "spark.hadoop.fs.azure.account.key.myaccount.dfs.core.windows.net",
        "spark.hadoop.fs.azure.sas.container.myaccount.blob.core.windows.net",
        "spark.hadoop.fs.gs.auth.service.account.private.key",
        "spark.kubernetes.authenticate.submission.oauthToken",
        "spark.hadoop.fs.azure.account.oauth2.client.secret",
        "schema.registry.basic.auth.credentials",
        "consumer.sasl.oauthbearer.client.credentials.client.secret",
        "my.api.key",
        "my.apikey",
        "bearer.token",
        "ssl.keystore.passphrase",
        "db.passwd",
    ],
)
def test_names_of_tokens_keys_and_credentials_are_secret(name: str) -> None:
    assert is_secret_name(name)
    assert mask_item(f"{name}={SECRET}") == f"{name}=***"


@pytest.mark.parametrize(
    "name",
    [
        "spark.hadoop.fs.s3a.aws.credentials.provider",
        "spark.hadoop.fs.azure.sas.token.provider.type",
        "key.serializer",
        "spark.sql.shuffle.partitions",
        "security.protocol",
        "ssl.ca.location",
    ],
)
def test_names_of_classes_and_plain_settings_are_not_secret(name: str) -> None:
    assert not is_secret_name(name)


# -- masking by what a value is --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("postgresql://u:pw-1234@h/db", "postgresql://u:***@h/db"),
        ("postgres://:pw-1234@h:5432/db", "postgres://:***@h:5432/db"),
        ("host=h user=u password=pw-1234 dbname=d", "host=h user=u password=*** dbname=d"),
        ("host=h password='pw 1234' dbname=d", "host=h password=*** dbname=d"),
        ("host=h password='p\\'w 1234' dbname=d", "host=h password=*** dbname=d"),
        (
            "jdbc:postgresql://h/db?user=u&password=pw-1234&ssl=true",
            "jdbc:postgresql://h/db?user=u&password=***&ssl=true",
        ),
        (
            "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=k3y==;EndpointSuffix=x",
            "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=***;EndpointSuffix=x",
        ),
        ("https://a.blob.core.windows.net/c?sv=2022&sig=abc%2Fdef", None),
        ("Authorization: Bearer abcdefgh.12345678", "Authorization: Bearer ***"),
        ("AKIAIOSFODNN7EXAMPLE", "***"),
        ("x eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJl y", "x *** y"),
        ("ghp_" + "a" * 36, "***"),
        ("-----BEGIN PRIVATE KEY-----\nMIIEv\n-----END PRIVATE KEY-----", None),
    ],
)
def test_values_that_are_secrets_are_masked_whatever_their_name(
    value: str, shown: str | None
) -> None:
    masked = mask_value(value)
    assert masked != value and "***" in masked
    if shown is not None:
        assert masked == shown
    assert mask_item(f"harmless.name={value}") == f"harmless.name={masked}"
    # ... and never shown in a log line either
    assert secret_values({"harmless.name": value}) or len(value) < 4


@pytest.mark.parametrize(
    "value", ["k1:9092,k2:9092", "s3a://bucket/dir", "spark://head:7077", "local[*]", "a=b"]
)
def test_plain_values_are_shown_as_they_are(value: str) -> None:
    assert mask_value(value) == value


def test_config_show_masks_cloud_tokens_and_dsn_passwords() -> None:
    output = config_show(
        *REQUIRED,
        "--engine",
        "spark",
        "--spark-conf",
        f"spark.hadoop.fs.s3a.session.token={SECRET}",
        "--spark-conf",
        f"spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net={SECRET}",
        "--spark-conf",
        f"spark.some.jdbc.url=jdbc:postgresql://h/db?user=u&password={SECRET}",
        "-X",
        f"sasl.oauthbearer.client.credentials.client.secret={SECRET}",
        "--master",
        f"spark://admin:{SECRET}@head:7077",
    )
    assert SECRET not in output
    spark_conf = tomllib.loads(output)["run"]["spark-conf"]
    assert spark_conf == [
        "spark.hadoop.fs.s3a.session.token=***",
        "spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net=***",
        "spark.some.jdbc.url=jdbc:postgresql://h/db?user=u&password=***",
    ]


# -- always TOML -----------------------------------------------------------------------------------


@given(st.text())
def test_a_toml_string_reads_back_and_stays_on_its_line(text: str) -> None:
    quoted = toml_string(text)
    assert tomllib.loads(f"x = {quoted}")["x"] == text
    assert quoted.isprintable()


def test_a_lone_surrogate_shows_as_the_replacement_character() -> None:
    quoted = toml_string("a\udcff")
    assert tomllib.loads(f"x = {quoted}")["x"] == "a\ufffd"


@settings(max_examples=60, deadline=None)
@given(
    st.text(
        st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
        min_size=1,
    )
)
def test_config_show_is_toml_whatever_a_value_holds(value: str) -> None:
    output = config_show(*REQUIRED, f"--master={value}", f"--output-suffix={value}")
    document = tomllib.loads(output)["run"]
    assert document["master"] == mask_value(value)
    assert document["output-suffix"] == mask_value(value)
    assert len(output.splitlines()) == len(config_show(*REQUIRED).splitlines())


def test_config_show_is_toml_with_control_characters_in_values() -> None:
    value = "a\x7fb\x1bc\u2028d\u202ee\tf"
    output = config_show(*REQUIRED, "--master", value)
    assert tomllib.loads(output)["run"]["master"] == value
    assert "\x7f" not in output and "\x1b" not in output and "\u2028" not in output


@pytest.mark.parametrize(
    "name", ["run\n[run]\nengine = 'spark'.toml", "a\x7f\u2028b.toml", 'q"uo\\te']
)
def test_the_config_files_path_cannot_inject_a_line(tmp_path: Path, name: str) -> None:
    file = tmp_path / name
    file.write_text('bootstrap-servers = "h:1"\n')
    output = config_show("--config", str(file), *REQUIRED[2:])
    document = tomllib.loads(output)  # a second [run] would not parse
    assert document["run"]["engine"] == "embedded"
    plain = config_show(*REQUIRED)
    assert len(output.splitlines()) == len(plain.splitlines()) + 1  # the "# config file:" line
    assert f"# config file: {toml_string(str(file))} (flag)" in output
    assert f"# file {toml_string(str(file))}" in output


def test_a_plain_path_shows_as_before(tmp_path: Path) -> None:
    assert shown_path(tmp_path / "run.toml") == str(tmp_path / "run.toml")
