"""Which configured values are secrets, and how they are masked.

A property is secret by its name: one containing `password` or `secret`, starting with `sasl.`
or `ssl.key` (after a `consumer.`/`producer.`/`admin.` prefix), or ending in `user.info` or
`auth.token` (schema registry credentials); the rule covers `-X` properties,
`--schema-registry-property` and `--spark-conf` entries alike. Any value may also carry a
password in a URL (`scheme://user:password@host`); only that part is masked there. Masked text
reads `***`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

MASK = "***"
# Shorter values are not looked for in free text (log lines): masking every "on" or "1" in a
# line would hide more than it protects, and a password that short protects nothing anyway.
MIN_REDACTED_LENGTH = 4

_ROLE_PREFIX = re.compile(r"^(?:consumer|producer|admin)\.", re.IGNORECASE)
# (`basic.auth.user.info` and `bearer.auth.token`: the schema registry client's credentials)
_SECRET_NAME = re.compile(
    r"password|secret|^sasl\.|^ssl\.key|user\.info$|auth\.token$", re.IGNORECASE
)
# scheme://user:password@ — the password runs to the last '@' before the host's first '/'.
_URL_PASSWORD = re.compile(r"(\b[A-Za-z][A-Za-z0-9+._-]*://[^\s:/@]*:)([^\s/]*)@")


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(_ROLE_PREFIX.sub("", name.strip())))


def mask_urls(text: str) -> str:
    """`sasl_ssl://svc:pw@kafka:9093` -> `sasl_ssl://svc:***@kafka:9093`."""
    return _URL_PASSWORD.sub(lambda m: f"{m.group(1)}{MASK}@", text)


def url_passwords(text: str) -> list[str]:
    return [m.group(2) for m in _URL_PASSWORD.finditer(text) if m.group(2)]


# libpq's keyword form (`password=...`, quoted or not), also as a URI query parameter.
_KEYWORD_PASSWORD = re.compile(r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&]+)", re.IGNORECASE)


def mask_dsn(text: str) -> str:
    """A database connection string with its password masked, in URI or keyword form."""
    return _KEYWORD_PASSWORD.sub(lambda m: f"{m.group(1)}{MASK}", mask_urls(text))


def mask_setting(name: str, value: str) -> str:
    """The value to show for `name=value`."""
    return MASK if is_secret_name(name) else mask_urls(value)


def mask_item(item: str) -> str:
    """A `name=value` item as shown; an item without `=` is shown as a mask (it may be a value
    typed on its own)."""
    name, sep, value = item.partition("=")
    if not sep:
        return MASK
    return f"{name}={mask_setting(name, value)}"


def secret_values(settings: Mapping[str, str], texts: Iterable[str] = ()) -> set[str]:
    """Every secret among `settings` (name -> value) and the URL passwords in them and in
    `texts`: what must never appear in a line the hydrator writes."""
    found: set[str] = set()
    for name, value in settings.items():
        if is_secret_name(name) and value:
            found.add(value)
        found.update(url_passwords(value))
    for text in texts:
        found.update(url_passwords(text))
    return {value for value in found if len(value) >= MIN_REDACTED_LENGTH}


def redact(text: str, secrets: Iterable[str]) -> str:
    """`text` with every occurrence of a secret replaced by the mask (longest first, so that a
    secret containing another is removed whole)."""
    for secret in sorted(secrets, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, MASK)
    return text
