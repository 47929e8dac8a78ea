"""A SASL password given by flag (-X), environment or config file appears in no line the hydrator
writes: its log in both formats, `config show`, error messages, the dead letters' headers, and
what `--metrics-port` serves (/metrics, /healthz, /readyz) during the run.

`secret_surfaces` gathers every place a secret could leak to; a new surface (the metrics
endpoint, say) is one more entry there, and every case below checks it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.harness.cdc_events import ToastTable
from tests.harness.kafka import Broker
from tests.harness.topics import create_topic, produce, read_topic

pytestmark = pytest.mark.integration

SECRET = 'Sup3r-s3cret pass"word'
# What a leak would show of it, in any quoting: each part alone is searched for.
SECRET_PARTS = ("Sup3r-s3cret", 'pass"word', 'pass\\"word')


@dataclass
class SecretRun:
    """One `hydrator run` with the secret given one way, and what it left behind."""

    args: list[str]
    env: dict[str, str]
    done: subprocess.CompletedProcess[str]
    bootstrap: str
    dlq_topic: str | None = None
    extra: dict[str, str] = field(default_factory=dict)


def hydrator(
    args: list[str], env: dict[str, str], timeout_s: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hydrator.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **env},
    )


SERVING = re.compile(r"serving /metrics, /healthz and /readyz on port (\d+)")
ENDPOINTS = ("/metrics", "/healthz", "/readyz")


def hydrator_scraped(
    args: list[str], env: dict[str, str], log: Path, timeout_s: float = 120
) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    """`hydrator` with `--metrics-port 0`, its endpoints read all along the run: what they
    served, by path (every answer, joined)."""
    served: dict[str, list[str]] = {path: [] for path in ENDPOINTS}
    with open(log, "w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "hydrator.cli", *args, "--metrics-port", "0"],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **env},
        )
        deadline = time.monotonic() + timeout_s
        port = None
        while process.poll() is None and time.monotonic() < deadline:
            match = SERVING.search(log.read_text())
            port = int(match.group(1)) if match else port
            for path in ENDPOINTS if port is not None else ():
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
                        served[path].append(r.read().decode())
                except urllib.error.HTTPError as error:
                    served[path].append(error.read().decode())
                except OSError:
                    pass  # the run is ending
            time.sleep(0.1)
        stdout, _ = process.communicate(timeout=max(deadline - time.monotonic(), 1))
    assert port is not None and served["/metrics"], "the run served no metrics"
    done = subprocess.CompletedProcess(args, process.returncode, stdout, log.read_text())
    return done, {f"GET {path}": "\n".join(texts) for path, texts in served.items()}


def secret_surfaces(run: SecretRun) -> dict[str, str]:
    """Every text a secret must not reach, by name. Extend here when the hydrator grows a new
    way to show something (an endpoint, a file it writes)."""
    surfaces = {
        "run stdout": run.done.stdout,
        "run stderr (log and error messages)": run.done.stderr,
    }
    shown = hydrator(["config", "show", *run.args[1:]], run.env)
    surfaces["config show"] = shown.stdout + shown.stderr
    if run.dlq_topic is not None:
        surfaces["DLQ headers"] = "\n".join(
            f"{name}={(value or b'').decode(errors='replace')}"
            for record in read_topic(run.bootstrap, run.dlq_topic)
            for name, value in record.headers
        )
    surfaces.update(run.extra)
    return surfaces


def assert_no_secret(run: SecretRun) -> None:
    for surface, text in secret_surfaces(run).items():
        for part in SECRET_PARTS:
            assert part not in text, f"the secret shows in {surface}:\n{text[-3000:]}"


def given(how: str, tmp_path: Path, properties: list[str]) -> tuple[list[str], dict[str, str]]:
    """The properties as -X flags, HYDRATOR_KAFKA_PROPERTY or a config file."""
    if how == "flag":
        return [arg for item in properties for arg in ("-X", item)], {}
    if how == "env":
        return [], {"HYDRATOR_KAFKA_PROPERTY": "\n".join(properties)}
    config = tmp_path / "run.toml"
    quoted = ", ".join('"' + p.replace("\\", "\\\\").replace('"', '\\"') + '"' for p in properties)
    config.write_text(f"[run]\nkafka-property = [{quoted}]\n")
    return ["--config", str(config)], {}


SASL = ["sasl.username=svc", f"sasl.password={SECRET}"]


@pytest.mark.parametrize("log_format", ["text", "json"])
@pytest.mark.parametrize("how", ["flag", "env", "file"])
def test_a_sasl_password_shows_nowhere(
    kafka_broker: Broker, unique_name: str, tmp_path: Path, how: str, log_format: str
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    create_topic(bootstrap, source, 1)
    table = ToastTable()
    poison = (b'{"id": 99}', b"not json at all", [])
    produce(bootstrap, source, [table.insert(1), poison, table.update(1)])
    secret_args, env = given(how, tmp_path, [*SASL, "debug=conf"])
    args = [
        "run",
        "--bootstrap-servers",
        bootstrap,
        "--application-id",
        unique_name,
        "--state-dir",
        str(tmp_path / "state"),
        "--input-topic",
        source,
        "--output-topic",
        output,
        "--available-now",
        "--log-level",
        "DEBUG",
        "--log-format",
        log_format,
        *secret_args,
    ]
    done, served = hydrator_scraped(args, env, tmp_path / "run.log")
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(read_topic(bootstrap, output)) == 2
    assert "sasl.password = [redacted]" in done.stderr  # the clients did get it
    run = SecretRun(args, env, done, bootstrap, dlq_topic=f"{unique_name}-dlq", extra=served)
    assert "hydrator.error" in secret_surfaces(run)["DLQ headers"]
    assert "hydrator_events_total" in served["GET /metrics"]
    assert_no_secret(run)


@pytest.mark.parametrize("how", ["flag", "env", "file"])
def test_error_messages_never_show_the_secret(
    kafka_broker: Broker, unique_name: str, tmp_path: Path, how: str
) -> None:
    base = [
        "run",
        "--application-id",
        unique_name,
        "--state-dir",
        str(tmp_path / "state"),
        "--input-topic",
        f"{unique_name}.items",
        "--output-suffix",
        ".out",
    ]
    create_topic(kafka_broker.bootstrap_servers, f"{unique_name}.items", 1)
    # a property librdkafka refuses, beside the secret
    secret_args, env = given(how, tmp_path, [*SASL, "producer.no.such.property=1"])
    args = [*base, "--bootstrap-servers", kafka_broker.bootstrap_servers, *secret_args]
    refused = hydrator(args, env)
    assert refused.returncode == 2 and "no.such.property" in refused.stderr
    assert_no_secret(SecretRun(args, env, refused, kafka_broker.bootstrap_servers))

    # no broker answers a bootstrap address that carries a password of its own
    secret_args, env = given(how, tmp_path, SASL)
    url = f"SASL_PLAINTEXT://svc:{SECRET.replace(' ', '%20')}@127.0.0.1:9"
    args = [*base, "--bootstrap-servers", url, "--startup-timeout", "2s", *secret_args]
    unreachable = hydrator(args, env)
    assert unreachable.returncode == 75, unreachable.stderr[-3000:]
    assert "--bootstrap-servers" in unreachable.stderr
    assert_no_secret(SecretRun(args, env, unreachable, kafka_broker.bootstrap_servers))

    if how == "flag":  # a malformed item: `=` forgotten
        args = [*base, "--bootstrap-servers", "h:1", "-X", f"sasl.password {SECRET}"]
        malformed = hydrator(args, {})
        assert malformed.returncode == 2 and "--kafka-property" in malformed.stderr
        assert_no_secret(SecretRun(args, {}, malformed, kafka_broker.bootstrap_servers))
