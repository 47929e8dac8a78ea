"""Unit tests of hydrator/reselect."""
