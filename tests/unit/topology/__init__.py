"""Unit tests of hydrator/topology."""
