"""docker/: what can be checked without a Docker engine. The compose file validates with a real
Compose implementation, every file it mounts or builds from exists, the connector it registers
is the one the tests run, and its services agree on topics and ports."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from hydrator.demo.connect import JSON_CONVERTER_SETTINGS
from hydrator.demo.connector import SETTINGS_FILE, connector_config, read_settings
from tests.harness.debezium import BridgeOptions, DebeziumBridge

ROOT = Path(__file__).resolve().parents[3]
DOCKER = ROOT / "docker"
COMPOSE_FILE = DOCKER / "compose.yaml"


def compose_command() -> list[str] | None:
    """Compose v2 (`docker compose`) when installed, else v1 (`docker-compose`, Debian's
    package)."""
    if shutil.which("docker"):
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=30)
        if probe.returncode == 0:
            return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return None


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE_FILE.read_text())


def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return compose["services"]


def env(service: dict[str, Any]) -> dict[str, str]:
    return {k: str(v) for k, v in service.get("environment", {}).items()}


def bind_mounts(service: dict[str, Any]) -> dict[str, Path]:
    """Container path -> host path of the service's bind mounts (named volumes left out)."""
    mounts = {}
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        if source.startswith((".", "/")):
            mounts[target] = (DOCKER / source).resolve()
    return mounts


def option(args: list[str], name: str) -> list[str]:
    """The values of `--name=value` arguments."""
    return [a.split("=", 1)[1] for a in args if a.startswith(f"--{name}=")]


@pytest.mark.parametrize("profile", [None, "spark"])
def test_compose_file_validates(profile: str | None) -> None:
    command = compose_command()
    if command is None:
        pytest.skip("no docker compose / docker-compose (Debian: apt-get install docker-compose)")
    args = [*command, "-f", str(COMPOSE_FILE)]
    if profile:
        args += ["--profile", profile]
    listed = subprocess.run(
        [*args, "config", "--services"], capture_output=True, text=True, timeout=60, cwd=DOCKER
    )
    assert listed.returncode == 0, listed.stderr
    names = set(listed.stdout.split())
    base = {"kafka", "postgres", "connect", "register-connector", "workload", "hydrator"}
    assert base | {"live", "prometheus", "grafana"} <= names
    spark = {"spark-master", "spark-worker", "hydrator-spark"}
    if profile == "spark":
        assert spark <= names


def test_every_mounted_and_built_file_exists(compose: dict[str, Any]) -> None:
    for name, service in services(compose).items():
        for target, source in bind_mounts(service).items():
            assert source.exists(), f"{name}: {source} (mounted at {target}) does not exist"
        build = service.get("build")
        if build:
            context = (DOCKER / build["context"]).resolve()
            dockerfile = context / build["dockerfile"]
            assert dockerfile.is_file(), f"{name}: no {dockerfile}"
            for line in dockerfile.read_text().splitlines():
                if line.startswith("COPY ") and "--from=" not in line:
                    for source in line.split()[1:-1]:
                        assert (context / source).exists(), f"Dockerfile copies missing {source}"


def test_the_registered_connector_is_the_tests_own(compose: dict[str, Any]) -> None:
    registrar = services(compose)["register-connector"]
    assert registrar["entrypoint"][-1] == "hydrator.demo.connector"
    args = registrar["command"]
    mounts = bind_mounts(registrar)
    (shared,) = option(args, "shared")
    assert mounts[shared] == SETTINGS_FILE
    deployment_file = mounts[args[-1]]

    # The tests' bridge runs Debezium with every shared setting unchanged ...
    db = SimpleNamespace(host="127.0.0.1", port=5432, user="postgres", password="", dbname="db")
    bridge = DebeziumBridge(db, "unused:9092", BridgeOptions(tables=["public.t"]))  # type: ignore[arg-type]
    shared_settings = read_settings(SETTINGS_FILE)
    tested = bridge.properties()
    assert {k: tested[k] for k in shared_settings} == shared_settings
    # ... and the stack registers them with only its own deployment's settings added.
    deployment = read_settings(deployment_file)
    registered = connector_config(deployment, shared_settings)
    assert registered == {**shared_settings, **deployment}
    assert not set(shared_settings) & set(deployment)


def test_the_connect_worker_writes_a_null_as_null(compose: dict[str, Any]) -> None:
    """The worker's JsonConverters take the settings the project's serializer uses (a NULL is
    not replaced by the column's default: docs/formats.md)."""
    worker = env(services(compose)["connect"])
    for kind in ("KEY", "VALUE"):
        for name, value in JSON_CONVERTER_SETTINGS.items():
            variable = f"CONNECT_{kind}_CONVERTER_{name.upper().replace('.', '_')}"
            assert worker.get(variable) == value, variable


def test_services_agree_on_topics_and_ports(compose: dict[str, Any]) -> None:
    all_services = services(compose)
    registrar = all_services["register-connector"]
    deployment = read_settings(bind_mounts(registrar)[registrar["command"][-1]])
    (table,) = deployment["table.include.list"].split(",")
    debezium_topic = f"{deployment['topic.prefix']}.{table}"
    assert option(registrar["command"], "wait-for-topic") == [debezium_topic]

    hydrator = env(all_services["hydrator"])
    assert hydrator["HYDRATOR_INPUT_TOPIC"] == debezium_topic
    live = env(all_services["live"])
    assert live["HYDRATOR_LIVE_TOPIC"] == debezium_topic + hydrator["HYDRATOR_OUTPUT_SUFFIX"]
    # the live rows are published on this machine only, unless LIVE_BIND says otherwise
    assert all_services["live"]["ports"] == ["${LIVE_BIND:-127.0.0.1}:8080:8080"]
    spark = env(all_services["hydrator-spark"])
    assert spark["HYDRATOR_INPUT_TOPIC"] == debezium_topic
    assert spark["HYDRATOR_APPLICATION_ID"] != hydrator["HYDRATOR_APPLICATION_ID"]
    assert spark["HYDRATOR_OUTPUT_SUFFIX"] != hydrator["HYDRATOR_OUTPUT_SUFFIX"]

    prometheus = yaml.safe_load((DOCKER / "prometheus" / "prometheus.yml").read_text())
    targets = {
        job["job_name"]: [t for c in job["static_configs"] for t in c["targets"]]
        for job in prometheus["scrape_configs"]
    }
    assert targets["hydrator"] == [f"hydrator:{hydrator['HYDRATOR_METRICS_PORT']}"]
    assert targets["hydrator-spark"] == [f"hydrator-spark:{spark['HYDRATOR_METRICS_PORT']}"]

    # The Spark checkpoint (under the state directory) is on a volume the worker shares.
    state_dir = "/var/lib/hydrator"
    for name in ("hydrator-spark", "spark-worker"):
        assert f"spark-state:{state_dir}" in all_services[name]["volumes"]


def test_dockerfile_runs_unprivileged_with_a_health_check() -> None:
    text = (DOCKER / "Dockerfile").read_text()
    users = re.findall(r"^USER (\S+)", text, re.MULTILINE)
    assert users and users[-1] not in ("root", "0")
    assert re.search(r"^HEALTHCHECK .*\n?.*/healthz", text, re.MULTILINE)
    assert "openjdk-17-jre-headless" in text
    assert re.search(r'^ENTRYPOINT \["hydrator"\]', text, re.MULTILINE)


def test_grafana_dashboard_uses_the_provisioned_datasource() -> None:
    datasources = yaml.safe_load(
        (DOCKER / "grafana/provisioning/datasources/prometheus.yaml").read_text()
    )
    (prometheus,) = datasources["datasources"]
    dashboard = json.loads((DOCKER / "grafana/dashboards/hydrator.json").read_text())
    panels = dashboard["panels"]
    assert panels
    for panel in panels:
        assert panel["datasource"]["uid"] == prometheus["uid"], panel["title"]
        for target in panel["targets"]:
            assert "hydrator" in target["expr"], panel["title"]
    provider = yaml.safe_load(
        (DOCKER / "grafana/provisioning/dashboards/hydrator.yaml").read_text()
    )
    grafana = services(yaml.safe_load(COMPOSE_FILE.read_text()))["grafana"]
    dashboards_dir = provider["providers"][0]["options"]["path"]
    assert bind_mounts(grafana)[dashboards_dir] == DOCKER / "grafana" / "dashboards"


def _healthcheck_command() -> list[str]:
    text = (DOCKER / "Dockerfile").read_text().replace("\\\n", " ")
    (line,) = [ln for ln in text.splitlines() if ln.startswith("HEALTHCHECK ")]
    return json.loads(line.split(" CMD ", 1)[1])


class _Health(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/healthz" else 404)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def test_the_image_health_check_asks_healthz_on_the_metrics_port() -> None:
    """Runs the Dockerfile's HEALTHCHECK command (the image's python is this one) against a
    server answering /healthz, then against a port nobody listens on."""
    command = _healthcheck_command()
    assert command[0] == "python"
    command = [sys.executable, *command[1:]]
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = str(server.server_address[1])
        alive = subprocess.run(command, env={"HYDRATOR_METRICS_PORT": port}, timeout=30)
        assert alive.returncode == 0
    finally:
        server.shutdown()
        server.server_close()
    gone = subprocess.run(
        command, env={"HYDRATOR_METRICS_PORT": port}, capture_output=True, timeout=30
    )
    assert gone.returncode != 0
