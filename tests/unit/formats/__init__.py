"""Unit tests of hydrator/formats: every envelope's codec, properties and fuzzing."""
