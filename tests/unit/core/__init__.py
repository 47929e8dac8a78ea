"""Unit tests of hydrator/core (the hydration rules, visibility, counters) and hydrator/exact.py."""
