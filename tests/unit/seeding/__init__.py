"""Unit tests of hydrator/seeding: the bootstrap's images."""
