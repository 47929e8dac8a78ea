"""Unit tests of hydrator/demo: the feeds, the Avro stream, the connector settings."""
