"""Unit tests of hydrator/dlq: dead letters and the replay's selection."""
