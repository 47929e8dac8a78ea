"""The Debezium Postgres connector settings the project runs with, kept in one file.

`postgres-connector.json` beside this module holds the settings that decide what the hydrator
reads: the connector class, the logical decoding plugin, how binary columns are shipped (the
hydrator needs `bytes` or `hex`: in the base64 modes an unchanged TOASTed bytea arrives as a
bare `null`), a publication limited to the captured tables, and the poll interval. Everything
that runs Debezium starts from that file and adds only what names one deployment (database
address, tables, topic prefix, slot, snapshot mode): the test harness's bridge, the demo's real
source, and the compose stack, whose one-shot `register-connector` service runs

    python -m hydrator.demo.connector --connect-url http://connect:8083 --name customers \
        --shared /etc/debezium/postgres-connector.json /etc/debezium/customers.json

to PUT the merged configuration to Kafka Connect's REST API. A deployment file may not give a
shared setting another value: that would make the stack differ from what the tests run.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path

import click

from hydrator.errors import ConfigurationError

SETTINGS_FILE = Path(__file__).with_name("postgres-connector.json")


class ConnectorConfigError(ConfigurationError, ValueError):
    """A connector settings file is unusable; the message names the file and the setting."""


def read_settings(path: Path) -> dict[str, str]:
    """A JSON object of string settings (Kafka Connect takes every value as a string)."""
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConnectorConfigError(f"{path}: cannot read connector settings: {exc}") from None
    if not isinstance(document, dict):
        raise ConnectorConfigError(f"{path}: connector settings must be a JSON object")
    for name, value in document.items():
        if not isinstance(value, str):
            raise ConnectorConfigError(
                f"{path}: setting {name!r} must be a string, not {type(value).__name__}"
            )
    return document


def shared_settings() -> dict[str, str]:
    """The settings every Debezium run of the project uses."""
    return read_settings(SETTINGS_FILE)


def connector_config(
    deployment: Mapping[str, str], shared: Mapping[str, str] | None = None, origin: str = ""
) -> dict[str, str]:
    """The shared settings plus one deployment's; a deployment may add settings, not change a
    shared one."""
    shared = shared_settings() if shared is None else shared
    changed = sorted(k for k, v in deployment.items() if k in shared and shared[k] != v)
    if changed:
        where = f"{origin}: " if origin else ""
        raise ConnectorConfigError(
            f"{where}changes shared connector settings ({', '.join(changed)}); "
            f"change {SETTINGS_FILE.name} instead, so the tests run what is deployed"
        )
    return {**shared, **deployment}


def register(connect_url: str, name: str, config: Mapping[str, str], timeout_s: float) -> int:
    """PUT the connector's configuration (creates or updates it); waits for Connect's REST API
    to answer, up to `timeout_s`. Returns the HTTP status (201 created, 200 updated)."""
    url = f"{connect_url.rstrip('/')}/connectors/{name}/config"
    body = json.dumps(dict(config)).encode()
    deadline = time.monotonic() + timeout_s
    while True:
        request = urllib.request.Request(
            url, data=body, method="PUT", headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return int(response.status)
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")
            # Connect answers 409 while its worker group rebalances, 5xx while starting up
            if exc.code != 409 and exc.code < 500:
                raise ConnectorConfigError(
                    f"Kafka Connect refused connector {name!r}: HTTP {exc.code} {detail}"
                ) from None
            reason = f"HTTP {exc.code} {detail}"
        except (urllib.error.URLError, OSError) as exc:
            reason = str(getattr(exc, "reason", exc))
        if time.monotonic() > deadline:
            raise TimeoutError(f"Kafka Connect at {connect_url} did not take {name!r}: {reason}")
        time.sleep(2)


def wait_for_topics(bootstrap_servers: str, topics: Sequence[str], timeout_s: float) -> None:
    """Block until every topic exists: `hydrator run` refuses a missing input topic, and
    Debezium creates its topics with the first record it writes."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    deadline = time.monotonic() + timeout_s
    missing = list(topics)
    while missing:
        try:
            known = admin.list_topics(timeout=10).topics
        except Exception:  # the broker may not answer yet; the deadline bounds the wait
            known = {}
        missing = [t for t in topics if t not in known or known[t].error is not None]
        if not missing:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"topics {', '.join(missing)} not created within {timeout_s:.0f}s")
        time.sleep(2)


@click.command()
@click.option("--connect-url", required=True, help="Kafka Connect's REST API.")
@click.option("--name", required=True, help="The connector's name.")
@click.option(
    "--shared",
    "shared_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=SETTINGS_FILE,
    show_default=True,
    help="The shared connector settings.",
)
@click.option("--timeout", "timeout_s", type=float, default=300.0, show_default=True)
@click.option("--bootstrap-servers", help="With --wait-for-topic: the broker.")
@click.option(
    "--wait-for-topic",
    "topics",
    multiple=True,
    help="After registering, wait until this topic exists; repeat for several.",
)
@click.argument("deployment", type=click.Path(dir_okay=False, path_type=Path))
def main(
    connect_url: str,
    name: str,
    shared_path: Path,
    timeout_s: float,
    bootstrap_servers: str | None,
    topics: tuple[str, ...],
    deployment: Path,
) -> None:
    """Register a Debezium Postgres connector: the shared settings plus DEPLOYMENT's."""
    if topics and not bootstrap_servers:
        raise click.UsageError("--wait-for-topic needs --bootstrap-servers")
    try:
        config = connector_config(
            read_settings(deployment), read_settings(shared_path), origin=str(deployment)
        )
        status = register(connect_url, name, config, timeout_s)
        click.echo(f"connector {name} {'created' if status == 201 else 'updated'}")
        if topics:
            assert bootstrap_servers is not None
            wait_for_topics(bootstrap_servers, topics, timeout_s)
            click.echo(f"topics ready: {', '.join(topics)}")
    except (ConnectorConfigError, TimeoutError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
