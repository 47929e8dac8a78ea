"""`hydrator config show`: the configuration `hydrator run` would use, option by option, with
where each value came from, as a TOML file in the shape `--config` reads (secrets masked).

Sources, highest first: the command line (`flag`), an `HYDRATOR_<NAME>` variable (`env NAME`),
the `--config` file (`file PATH`), the built-in default (`default`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from hydrator.config import format_duration_ms, format_size_bytes
from hydrator.secrets import mask_dsn, mask_item, mask_value

# Where the config file's path is kept for the options it supplies.
CONFIG_FILE_META = "hydrator.config_file"
# Options whose values are `name=value` items, some of which may be secrets.
_ITEM_OPTIONS = frozenset({"kafka-property", "schema-registry-property", "spark-conf"})
# Options whose values are database connection strings (their password masked).
_DSN_OPTIONS = frozenset({"reselect"})


@dataclass(frozen=True)
class Setting:
    name: str  # the long option name, as the config file spells it
    value: Any  # as shown: str, int, bool, list of str, or None (not set)
    source: str


def long_name(param: click.Parameter) -> str:
    longs = [opt for opt in param.opts if opt.startswith("--")]
    return (longs[0] if longs else param.opts[0]).lstrip("-")


def source_of(ctx: click.Context, param: click.Parameter) -> str:
    source = ctx.get_parameter_source(param.name or "")
    if source is ParameterSource.COMMANDLINE:
        return "flag"
    if source is ParameterSource.ENVIRONMENT:
        envvar = param.envvar if isinstance(param.envvar, str) else None
        return f"env {envvar}" if envvar else "env"
    if source is ParameterSource.DEFAULT_MAP:
        return f"file {shown_path(ctx.meta.get(CONFIG_FILE_META, '?'))}"
    return "default"


def shown_value(param: click.Parameter, value: Any) -> Any:
    """The value as an operator reads it: durations and sizes spelled as options take them,
    secrets masked."""
    if value is None:
        return None
    if isinstance(value, tuple | list):
        items = [str(item) for item in value]
        if long_name(param) in _ITEM_OPTIONS:
            return [mask_item(item) for item in items]
        return [mask_value(item) for item in items]
    if isinstance(value, bool):
        return value
    kind = getattr(param.type, "name", "")
    if kind == "duration":
        return format_duration_ms(int(value))
    if kind == "size":
        return format_size_bytes(int(value))
    if isinstance(value, int | float):
        return value
    if long_name(param) in _DSN_OPTIONS:
        return mask_value(mask_dsn(str(value)))
    return mask_value(str(value))


def effective_settings(
    ctx: click.Context, values: Mapping[str, Any], overrides: Mapping[str, Any] | None = None
) -> list[Setting]:
    """Every option of the command in its declared order; `overrides` replaces a parsed value
    by its normalised form (input topics split on commas, say)."""
    overrides = overrides or {}
    settings = []
    for param in ctx.command.params:
        if not isinstance(param, click.Option) or not param.expose_value or param.hidden:
            continue
        value = overrides.get(param.name or "", values.get(param.name or ""))
        settings.append(Setting(long_name(param), shown_value(param, value), source_of(ctx, param)))
    return settings


def toml_string(text: str) -> str:
    """`text` as a TOML basic string that reads back as `text`: quotes, backslashes and every
    character that is not printable (controls, U+007F, line and paragraph separators, format
    characters such as bidi overrides) escaped, so the string stays on its line and shows what
    it holds. A lone surrogate (undecodable bytes in the environment), which no TOML string can
    hold, shows as U+FFFD."""
    out = ['"']
    for char in text:
        if char == '"' or char == "\\":
            out.append("\\" + char)
        elif char in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[char])
        elif char.isprintable():
            out.append(char)
        elif 0xD800 <= ord(char) <= 0xDFFF:
            out.append("\\uFFFD")
        elif ord(char) <= 0xFFFF:
            out.append(f"\\u{ord(char):04X}")
        else:
            out.append(f"\\U{ord(char):08X}")
    out.append('"')
    return "".join(out)


_SHORT_ESCAPES = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def shown_path(path: str | Path) -> str:
    """A path for a comment line: as it is when that is plain, else quoted as a TOML string (a
    newline in it must not start a line of its own)."""
    text = str(path)
    plain = text.isprintable() and text == text.strip() and not any(c in text for c in '"\\')
    return text if plain and text else toml_string(text)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    return toml_string(str(value))


def render(settings: Iterable[Setting], config_file: Path | None, config_source: str) -> str:
    """A TOML document `--config` reads back (apart from the masked secrets): each line
    `name = value  # source`; an option without a value is a comment."""
    rows = []
    for setting in settings:
        if setting.value is None:
            rows.append((f"# {setting.name} = (not set)", setting.source))
        else:
            rows.append((f"{setting.name} = {_toml_value(setting.value)}", setting.source))
    width = min(max((len(line) for line, _ in rows), default=0), 60)
    lines = ["# The configuration `hydrator run` would use with these options; secrets show ***."]
    if config_file is not None:
        lines.append(f"# config file: {shown_path(config_file)} ({config_source})")
    lines.append("[run]")
    lines += [f"{line.ljust(width)}  # {source}" for line, source in rows]
    return "\n".join(lines) + "\n"
