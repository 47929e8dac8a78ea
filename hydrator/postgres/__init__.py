"""Talking to a Postgres source: re-selecting rows for the re-select fallback, and encoding
Postgres values exactly as Debezium's JSON converter ships them."""
