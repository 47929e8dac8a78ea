"""Unit tests of hydrator/metrics: the exporter, merged scrapes, count lines."""
