"""The build behind `pip install .` and `pip install -e .` (pyproject.toml has the rest).

The modules the hot path spends its time in (`[tool.toast-hydrator] compiled` in pyproject.toml)
are compiled by mypyc into C extensions that sit next to their sources and are imported in their
place. Where that cannot be done (mypyc missing, no C compiler, a compile error) the same modules
install as they are, interpreted, and the build says why in one line: the install never fails
for it. HYDRATOR_COMPILED=0 builds the interpreted package on purpose. docs/operations.md
("Compiled core") says how to tell which one runs.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import tempfile
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from setuptools import Distribution, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

SWITCH = "HYDRATOR_COMPILED"
ROOT = Path(__file__).parent
COMPILED: list[str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"][
    "toast-hydrator"
]["compiled"]
# One shared library for every compiled module (so calls between them are C calls), kept inside
# the package: hydrator/_compiled__mypyc*.so.
GROUP = "hydrator._compiled"


def compiling_wanted() -> bool:
    return os.environ.get(SWITCH, "1") != "0"


def say(message: str) -> None:
    print(f"toast-hydrator: {message}", file=sys.stderr, flush=True)


class CompiledCoreDistribution(Distribution):
    def has_ext_modules(self) -> bool:  # the extensions are made by build_ext itself (below)
        return compiling_wanted()


class BuildCompiledCore(build_ext):
    """build_ext that makes the mypyc extensions when it runs (not when setup.py is read: pip
    reads it several times per install, and type-checking the modules takes seconds), compiles
    their C files in parallel, and falls back to the interpreted modules on any failure."""

    def finalize_options(self) -> None:
        # once per build: setuptools may finalize the command again
        if compiling_wanted() and self.distribution.ext_modules is None:
            self.distribution.ext_modules = self._extensions()
        super().finalize_options()

    sources_read_at = 0.0  # when mypyc read the sources it compiles

    def _extensions(self) -> list[Any]:
        try:
            from mypyc.build import mypycify
        except ImportError as exc:
            self._not_compiled(f"mypyc is not installed ({exc})")
            return []
        broken = compiler_fault()
        if broken:  # found in a second, before mypyc's minutes of type analysis
            self._not_compiled(f"compiling failed ({broken})")
            return []
        target = Path("build", f"mypyc-{sysconfig.get_platform()}-{sys.implementation.cache_tag}")
        self.sources_read_at = time.time()
        try:
            extensions = mypycify(
                # A fresh `pip install` builds before it installs the dependencies: their
                # modules (orjson, fastavro, ...) are typed as Any then, called the Python way,
                # and a `type: ignore` their stubs call for is unused then.
                [
                    *COMPILED,
                    "--config-file",
                    str(ROOT / "pyproject.toml"),
                    "--ignore-missing-imports",
                    "--no-warn-unused-ignores",
                ],
                group_name=GROUP,
                multi_file=True,  # one C file per module, compiled in parallel (below)
                target_dir=str(target),
            )
        except (Exception, SystemExit) as exc:  # mypyc exits on a type error
            self._not_compiled(f"mypyc failed ({_first_line(exc)})")
            return []
        for extension in extensions:  # the group's headers are where its package is
            extension.include_dirs.append(str(target.joinpath(*GROUP.split(".")[:-1])))
        return extensions

    def run(self) -> None:
        if not self.extensions:
            remove_compiled(self.target())  # an earlier build's: they would be imported instead
            return
        try:
            super().run()
        except (Exception, SystemExit) as exc:
            remove_compiled(self.target())
            self._not_compiled(f"compiling failed ({_first_line(exc)})")
            return
        if self.target() == ROOT:
            mark_built(ROOT, self.sources_read_at)

    def target(self) -> Path:
        return ROOT if self.inplace or self.editable_mode else Path(self.build_lib)

    def build_extension(self, ext: Any) -> None:
        original = self.compiler.compile
        jobs = os.cpu_count() or 1

        def compile_in_parallel(sources: list[str], *args: Any, **kwargs: Any) -> list[str]:
            if len(sources) < 2 or jobs < 2:
                return original(sources, *args, **kwargs)
            with ThreadPoolExecutor(jobs) as pool:
                parts = pool.map(lambda source: original([source], *args, **kwargs), sources)
                return [obj for objects in parts for obj in objects]

        self.compiler.compile = compile_in_parallel
        try:
            super().build_extension(ext)
        finally:
            self.compiler.compile = original

    def _not_compiled(self, why: str) -> None:
        say(f"installing the interpreted modules only: {why}")
        self.distribution.ext_modules = self.extensions = []


class BuildPy(build_py):
    """build_py that, for an interpreted build, removes what an earlier compiled build left
    where this one installs from (build_ext does not run then)."""

    def run(self) -> None:
        if not compiling_wanted():
            say(f"installing the interpreted modules only: {SWITCH}=0")
            remove_compiled(ROOT if self.editable_mode else Path(self.build_lib))
        super().run()


def compiler_fault() -> str | None:
    """Why this machine's C compiler cannot build an extension of this Python (a compiler that
    does not run, missing Python headers), or None when a file including Python.h compiles."""
    from setuptools._distutils.ccompiler import new_compiler
    from setuptools._distutils.sysconfig import customize_compiler

    compiler = new_compiler()
    customize_compiler(compiler)  # CC, CFLAGS... as the build itself uses them
    with tempfile.TemporaryDirectory() as scratch:
        probe = Path(scratch, "probe.c")
        probe.write_text("#include <Python.h>\nint probe(void) { return 0; }\n")
        try:
            compiler.compile(
                [str(probe)], output_dir=scratch, include_dirs=[sysconfig.get_paths()["include"]]
            )
        except Exception as exc:
            return f"no working C compiler for Python extensions: {_first_line(exc)}"
    return None


def compiled_files(base: Path) -> list[Path]:
    """Where the compiled modules are under `base` (a build directory, or the sources of an
    editable install)."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    modules = [name.removesuffix(".py") for name in COMPILED]
    return [
        base / f"{module}{suffix}" for module in [*modules, GROUP.replace(".", "/") + "__mypyc"]
    ]


def remove_compiled(base: Path) -> None:
    for path in compiled_files(base):
        path.unlink(missing_ok=True)


def mark_built(base: Path, sources_read_at: float) -> None:
    """Date an editable install's compiled modules when their sources were read, which is what
    the package compares an edit's time with (hydrator/__init__.py): a build that found no code
    changed (an edit to a comment) compiles nothing and would leave them older than the edited
    source, and a source edited while the build ran must count as newer than its build."""
    for path in compiled_files(base):
        if path.exists():
            os.utime(path, (sources_read_at, sources_read_at))


def _first_line(exc: BaseException, most: int = 160) -> str:
    """What failed, short enough for one line (a compiler's message quotes its whole command
    line; the build's own output above has the rest)."""
    text = (str(exc).strip() or type(exc).__name__).splitlines()[0]
    return text if len(text) <= most else text[: most - 3] + "..."


setup(
    distclass=CompiledCoreDistribution,
    cmdclass={"build_ext": BuildCompiledCore, "build_py": BuildPy},
)
