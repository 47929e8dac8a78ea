"""Which configured values are secrets, and how they are masked.

A secret is found two ways, and masked as `***`:

* By the property's name (`-X` properties, `--schema-registry-property` and `--spark-conf`
  entries alike, after a `consumer.`/`producer.`/`admin.` prefix, or the `connector.` and
  `kafka.` of an option for Spark's Kafka connector): one that speaks of a
  password, passphrase, secret, token, credential, bearer, API key, access key, account key or
  private key, a last part `key` (`spark.hadoop.fs.azure.account.key.<account>...`,
  `fs.s3a.encryption.key`), a SAS (`fs.azure.sas.<container>.<account>...`), one starting with
  `sasl.` or `ssl.key`, or ending in `user.info` (the schema registry's basic auth). Its whole
  value is masked; a name for a class (`...credentials.provider`, `...class`) is not a secret.
* By what a value is, whatever its name (any option): the password of a URL or DSN
  (`postgresql://user:password@host/db`), a `password=`/`token=`/`AccountKey=`... field of a
  connection string or query string, a `Bearer` token, a PEM private key, and the shapes cloud
  and code hosts give their credentials (AWS access key ids, JSON web tokens, GitHub and Slack
  tokens). Only those parts are masked.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

MASK = "***"
# Shorter values are not looked for in free text (log lines): masking every "on" or "1" in a
# line would hide more than it protects, and a password that short protects nothing anyway.
MIN_REDACTED_LENGTH = 4

# A client role (`-X consumer.…`), a raw option of Spark's Kafka connector (`-X connector.…`),
# a Kafka client property as a Spark option (`kafka.…`), in any combination.
_ROLE_PREFIX = re.compile(r"^(?:(?:consumer|producer|admin|connector|kafka)\.)+", re.IGNORECASE)
_SECRET_NAME = re.compile(
    r"password|passwd|passphrase|secret|token|credential|bearer"
    r"|api[._-]?key|access[._-]?key|account[._-]?key|private[._-]?key"
    r"|(?:^|[._-])key$|(?:^|\.)sas(?:\.|$)|^sasl\.|^ssl\.key|user\.info$",
    re.IGNORECASE,
)
# ... but a name for a class or a kind is not a secret (`fs.s3a.aws.credentials.provider`).
_CLASS_NAME = re.compile(r"\.(?:provider|provider\.type|class|impl)$", re.IGNORECASE)
# Parts of a value that are secrets by what they are; each pattern's group `secret` is masked.
_SECRET_PARTS = [
    # scheme://user:password@ — the password runs to the last '@' before the host's first '/'.
    re.compile(r"\b[A-Za-z][A-Za-z0-9+._-]*://[^\s:/@]*:(?P<secret>[^\s/]*)@"),
    # password=... in a key=value connection string (libpq, JDBC, ODBC, Azure's), a query
    # string or a JAAS line; quoted values whole.
    re.compile(
        r"(?i)(?:^|(?<=[\s;&?,]))"
        r"(?:password|passwd|pwd|passphrase|secret|client_secret|token|access_token|api[_-]?key"
        r"|account[_-]?key|shared[_-]?access[_-]?key|sig)"
        r"""\s*=\s*(?P<secret>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|[^\s;&,"']+)"""
    ),
    re.compile(r"(?i)\bbearer\s+(?P<secret>[A-Za-z0-9._~+/=-]{8,})"),
    re.compile(r"PRIVATE KEY-----(?P<secret>.*?)-----END", re.DOTALL),  # PEM
    re.compile(r"\b(?P<secret>(?:AKIA|ASIA)[0-9A-Z]{16})\b"),  # AWS access key id
    re.compile(r"\b(?P<secret>eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]+)"),  # JWT
    re.compile(r"\b(?P<secret>gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})"),
    re.compile(r"\b(?P<secret>xox[abposr]-[A-Za-z0-9-]{10,})"),  # Slack
]
# Only the URL password rule (the first above): what `mask_urls` masks.
_URL_PASSWORD = _SECRET_PARTS[0]


def is_secret_name(name: str) -> bool:
    bare = _ROLE_PREFIX.sub("", name.strip())
    if re.match(r"(?i)sasl\.|ssl\.key", bare):
        return True
    return bool(_SECRET_NAME.search(bare)) and not _CLASS_NAME.search(bare)


def _masked(text: str, patterns: Iterable[re.Pattern[str]]) -> str:
    for pattern in patterns:
        text = pattern.sub(
            lambda m: (
                m.group(0)[: m.start("secret") - m.start()]
                + MASK
                + m.group(0)[m.end("secret") - m.start() :]
            ),
            text,
        )
    return text


def mask_urls(text: str) -> str:
    """`sasl_ssl://svc:pw@kafka:9093` -> `sasl_ssl://svc:***@kafka:9093`."""
    return _masked(text, [_URL_PASSWORD])


def mask_value(text: str) -> str:
    """`text` with every part that is a secret by what it is masked (URL passwords, DSN and
    query-string passwords, tokens, keys)."""
    return _masked(text, _SECRET_PARTS)


def url_passwords(text: str) -> list[str]:
    return [m.group("secret") for m in _URL_PASSWORD.finditer(text) if m.group("secret")]


def secret_parts(text: str) -> list[str]:
    """The parts of `text` that `mask_value` masks (quotes around a quoted one removed)."""
    found = []
    for pattern in _SECRET_PARTS:
        for match in pattern.finditer(text):
            part = match.group("secret")
            if len(part) >= 2 and part[0] == part[-1] and part[0] in "\"'":
                part = part[1:-1]
            if part:
                found.append(part)
    return found


# libpq's keyword form (`password=...`, quoted or not), also as a URI query parameter.
_KEYWORD_PASSWORD = re.compile(r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&]+)", re.IGNORECASE)


def mask_dsn(text: str) -> str:
    """A database connection string with its password masked, in URI or keyword form."""
    return _KEYWORD_PASSWORD.sub(lambda m: f"{m.group(1)}{MASK}", mask_urls(text))


def mask_setting(name: str, value: str) -> str:
    """The value to show for `name=value`."""
    return MASK if is_secret_name(name) else mask_value(value)


def mask_item(item: str) -> str:
    """A `name=value` item as shown; an item without `=` is shown as a mask (it may be a value
    typed on its own)."""
    name, sep, value = item.partition("=")
    if not sep:
        return MASK
    return f"{name}={mask_setting(name, value)}"


def secret_values(settings: Mapping[str, str], texts: Iterable[str] = ()) -> set[str]:
    """Every secret among `settings` (name -> value) and the secret parts of them and of
    `texts`: what must never appear in a line the hydrator writes."""
    found: set[str] = set()
    for name, value in settings.items():
        if is_secret_name(name) and value:
            found.add(value)
        found.update(secret_parts(value))
    for text in texts:
        found.update(secret_parts(text))
    return {value for value in found if len(value) >= MIN_REDACTED_LENGTH}


def redact(text: str, secrets: Iterable[str]) -> str:
    """`text` with every occurrence of a secret replaced by the mask (longest first, so that a
    secret containing another is removed whole)."""
    for secret in sorted(secrets, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, MASK)
    return text
