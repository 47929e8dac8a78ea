"""Unit tests of hydrator/kafka."""
