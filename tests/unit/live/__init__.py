"""Unit tests of hydrator/live: the live view's rows and access."""
