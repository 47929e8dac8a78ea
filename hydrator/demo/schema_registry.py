"""A Confluent-compatible schema registry that keeps its schemas in memory, in-process, for
`hydrator demo --source avro` and the tests; not for production (use a real registry there).

No schema registry installs from the package registries this project reaches (docs/testing.md
says which were tried), so this answers, on a loopback port, the REST calls the two clients in
play make, as Confluent Schema Registry answers them:

* Kafka Connect's AvroConverter (Java, kafka-schema-registry-client 7.0): register a version
  (`POST /subjects/{subject}/versions`), look a schema up in a subject (`POST
  /subjects/{subject}`), fetch by id (`GET /schemas/ids/{id}`), read the config;
* confluent-kafka's SchemaRegistryClient (Python): fetch by id, register, look up, versions.

Ids are global and a schema registered again (in any subject) keeps its id, as the real
registry does. `stop()` makes it refuse connections (an outage); `start()` again serves the same
schemas on the same port.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlparse

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


def _normal(schema: str) -> str:
    """One spelling per schema, so the same schema registered twice gets the same id."""
    try:
        return json.dumps(json.loads(schema), sort_keys=True, separators=(",", ":"))
    except ValueError:
        return schema


class InMemorySchemaRegistry:
    def __init__(self, port: int = 0) -> None:
        self.port = port
        self.schemas: dict[int, dict[str, Any]] = {}  # id -> {"schema": ..., "schemaType": ...}
        self.ids: dict[str, int] = {}  # normal spelling -> id
        self.subjects: dict[str, list[int]] = {}  # subject -> ids, version = index + 1
        self.requests: list[str] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> InMemorySchemaRegistry:
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                self._answer("GET")

            def do_POST(self) -> None:
                self._answer("POST")

            def do_PUT(self) -> None:
                self._answer("PUT")

            def do_DELETE(self) -> None:
                self._answer("DELETE")

            def _answer(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                path = unquote(urlparse(self.path).path).rstrip("/")
                status, answer = registry.handle(method, path, body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", CONTENT_TYPE)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        ThreadingHTTPServer.allow_reuse_address = True
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="schema-registry", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None

    def __enter__(self) -> InMemorySchemaRegistry:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    # -- the REST API --------------------------------------------------------------------------

    def register(self, subject: str, schema: str, schema_type: str = "AVRO") -> int:
        with self._lock:
            key = _normal(schema)
            schema_id = self.ids.get(key)
            if schema_id is None:
                schema_id = len(self.schemas) + 1
                self.ids[key] = schema_id
                self.schemas[schema_id] = {"schema": schema, "schemaType": schema_type}
            versions = self.subjects.setdefault(subject, [])
            if schema_id not in versions:
                versions.append(schema_id)
            return schema_id

    def handle(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        self.requests.append(f"{method} {path}")
        if m := re.fullmatch(r"/schemas/ids/(\d+)", path):
            found = self.schemas.get(int(m.group(1)))
            if found is None:
                return 404, {"error_code": 40403, "message": "Schema not found"}
            answer = {"schema": found["schema"]}
            if found["schemaType"] != "AVRO":
                answer["schemaType"] = found["schemaType"]
            return 200, answer
        if m := re.fullmatch(r"/schemas/ids/(\d+)/versions", path):
            schema_id = int(m.group(1))
            return 200, [
                {"subject": s, "version": ids.index(schema_id) + 1}
                for s, ids in self.subjects.items()
                if schema_id in ids
            ]
        if path == "/subjects":
            return 200, sorted(self.subjects)
        if m := re.fullmatch(r"/subjects/([^/]+)/versions", path):
            subject = m.group(1)
            if method == "POST":
                schema_type = (body or {}).get("schemaType", "AVRO")
                return 200, {"id": self.register(subject, body["schema"], schema_type)}
            if subject not in self.subjects:
                return 404, {"error_code": 40401, "message": f"Subject '{subject}' not found."}
            return 200, list(range(1, len(self.subjects[subject]) + 1))
        if m := re.fullmatch(r"/subjects/([^/]+)/versions/([^/]+)(/schema)?", path):
            subject, version = m.group(1), m.group(2)
            ids = self.subjects.get(subject)
            if not ids:
                return 404, {"error_code": 40401, "message": f"Subject '{subject}' not found."}
            index = len(ids) - 1 if version == "latest" else int(version) - 1
            if not 0 <= index < len(ids):
                return 404, {"error_code": 40402, "message": "Version not found."}
            found = self.schemas[ids[index]]
            if m.group(3):
                return 200, json.loads(found["schema"])
            return 200, self._version(subject, index)
        if m := re.fullmatch(r"/subjects/([^/]+)", path):
            subject = m.group(1)
            ids = self.subjects.get(subject)
            if method == "POST":  # is this schema registered under the subject?
                known = self.ids.get(_normal(body["schema"]))
                if not ids:
                    return 404, {"error_code": 40401, "message": f"Subject '{subject}' not found."}
                if known is None or known not in ids:
                    return 404, {"error_code": 40403, "message": "Schema not found"}
                return 200, self._version(subject, ids.index(known))
            if method == "DELETE" and ids is not None:
                del self.subjects[subject]
                return 200, list(range(1, len(ids) + 1))
            return 404, {"error_code": 40401, "message": f"Subject '{subject}' not found."}
        if re.fullmatch(r"/config(/[^/]+)?", path):
            if method == "PUT":
                return 200, body
            return 200, {"compatibilityLevel": "NONE"}
        if path == "/mode" or path.startswith("/mode/"):
            return 200, {"mode": "READWRITE"}
        if path.startswith("/compatibility/"):
            return 200, {"is_compatible": True}
        return 404, {"error_code": 404, "message": f"HTTP 404 Not Found: {method} {path}"}

    def _version(self, subject: str, index: int) -> dict[str, Any]:
        schema_id = self.subjects[subject][index]
        found = self.schemas[schema_id]
        answer = {
            "subject": subject,
            "version": index + 1,
            "id": schema_id,
            "schema": found["schema"],
        }
        if found["schemaType"] != "AVRO":
            answer["schemaType"] = found["schemaType"]
        return answer
