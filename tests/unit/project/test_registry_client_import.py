"""`--schema-registry-url` loads confluent-kafka's registry client, which imports authlib. With
only httpx installed, authlib warns on that import ("The httpx module is deprecated; please use
httpx2 instead"), a line in every such run; httpx2 is a dependency, so nothing is said."""

from __future__ import annotations

import subprocess
import sys

_CLIENT = (
    "from confluent_kafka.schema_registry import SchemaRegistryClient as C; "
    "C({'url': 'http://127.0.0.1:1'})"
)


def test_the_schema_registry_client_imports_without_a_warning() -> None:
    done = subprocess.run(
        [sys.executable, "-W", "always", "-c", _CLIENT],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
