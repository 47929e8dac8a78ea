"""Unit tests of hydrator/engines: both engines alike here, each engine in its own folder."""
