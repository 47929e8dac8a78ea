"""The Spark engine's checkpoint directory, `<state-dir>/<application-id>/checkpoint`, and the
engine's own small files in it, reached the way Spark reaches its checkpoint.

`--state-dir` is a path or a URI. A path is a local directory: it is made absolute and given the
`file:` scheme, so a Hadoop configuration whose default filesystem is HDFS does not move it. A URI
(`file://`, `hdfs://`, `s3a://`, `abfss://`, `gs://`...) goes to the Hadoop filesystem Spark has
for its scheme. On a cluster it must be a location every node reaches: the executors keep the
state store there, and any of them may take over a partition's state.

The engine's own files (the processing clock, clock.py) go through the same Hadoop filesystem,
in the driver's JVM, so they work wherever the checkpoint works, with the same connector jars and
credentials (`spark.hadoop.*`). Executors never read them.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from py4j.protocol import Py4JError, Py4JJavaError
from pyspark.sql import SparkSession

from hydrator.config import StateDirUnusable, is_uri


def checkpoint_location(state_dir: str | Path, application_id: str) -> str:
    """The checkpoint's URI under --state-dir."""
    if is_uri(state_dir):
        return f"{str(state_dir).rstrip('/')}/{application_id}/checkpoint"
    return (Path(state_dir).absolute() / application_id / "checkpoint").as_uri()


class CheckpointDirectory:
    """Small whole-file reads and writes in the checkpoint directory, through Hadoop."""

    def __init__(self, spark: SparkSession, location: str) -> None:
        self.location = location
        jvm = spark.sparkContext._jvm
        assert jvm is not None  # None only before a SparkContext starts; the session has one
        self._jvm = jvm
        self._path = jvm.org.apache.hadoop.fs.Path(location)
        try:
            self._fs = self._path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
        except Py4JJavaError as exc:
            raise StateDirUnusable(self._no_filesystem(exc)) from None

    def check_writable(self) -> None:
        """Create the directory and prove a file can be written in it (before any topic is
        created: a bad --state-dir must leave nothing behind)."""
        probe = f".write-check-{os.getpid()}"
        try:
            if not self._fs.mkdirs(self._path):
                raise OSError("the filesystem refused to create it")
            self.write(probe, b"")
            self._fs.delete(self._child(probe), False)
        except (OSError, Py4JError) as exc:
            raise StateDirUnusable(
                f"--state-dir: cannot create or write {self.location}: {_reason(exc)}"
            ) from None

    def read(self, name: str) -> bytes | None:
        """The file's bytes; None when there is no such file."""
        stream = None
        try:
            stream = self._fs.open(self._child(name))
            return bytes(self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
        except Py4JJavaError as exc:
            if _java_class(exc) == "java.io.FileNotFoundException":
                return None
            raise OSError(f"cannot read {self.location}/{name}: {_reason(exc)}") from None
        except Py4JError as exc:
            raise OSError(f"cannot read {self.location}/{name}: {exc}") from None
        finally:
            _close(stream)

    def write(self, name: str, data: bytes) -> None:
        """Create or replace the file. Not atomic on every filesystem (HDFS and the local one
        truncate first): a reader must survive a torn file."""
        stream = None
        try:
            stream = self._fs.create(self._child(name), True)
            stream.write(bytearray(data))
            stream.close()
            stream = None
        except Py4JError as exc:
            raise OSError(f"cannot write {self.location}/{name}: {_reason(exc)}") from None
        finally:
            _close(stream)

    def _child(self, name: str) -> Any:  # a Hadoop Path in the JVM
        return self._jvm.org.apache.hadoop.fs.Path(self._path, name)

    def _no_filesystem(self, exc: Py4JJavaError) -> str:
        scheme = str(self._path.toUri().getScheme())
        message = f"--state-dir: cannot use {self.location}: {_reason(exc)}"
        if not _missing_filesystem(exc.java_exception):
            return message
        hadoop = str(self._jvm.org.apache.hadoop.util.VersionInfo.getVersion())
        package = _CONNECTORS.get(scheme.lower())
        how = f"--packages {package.format(hadoop=hadoop)}" if package else "its connector jar"
        return (
            f"{message}. Spark has no filesystem for '{scheme}:' on its classpath: add it "
            f"({how}; this Spark runs Hadoop {hadoop})"
        )


# The Maven package of the Hadoop filesystem of a scheme, for the hint when it is missing.
_CONNECTORS = {
    "s3a": "org.apache.hadoop:hadoop-aws:{hadoop}",
    "abfs": "org.apache.hadoop:hadoop-azure:{hadoop}",
    "abfss": "org.apache.hadoop:hadoop-azure:{hadoop}",
}


def _missing_filesystem(java: Any) -> bool:
    """No filesystem for the scheme, or its class is configured but not on the classpath."""
    while java is not None:
        name = str(java.getClass().getName())
        if name in (
            "org.apache.hadoop.fs.UnsupportedFileSystemException",
            "java.lang.ClassNotFoundException",
        ):
            return True
        java = java.getCause()
    return False


def _java_class(exc: Py4JJavaError) -> str:
    return str(exc.java_exception.getClass().getName())


def _reason(exc: BaseException) -> str:
    if isinstance(exc, Py4JJavaError):
        java = exc.java_exception
        return f"{java.getClass().getSimpleName()}: {java.getMessage()}"
    return str(exc)


def _close(stream: object) -> None:
    if stream is None:
        return
    with contextlib.suppress(Py4JError):  # the error that brought us here is the one to report
        stream.close()  # type: ignore[attr-defined]
