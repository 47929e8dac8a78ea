"""Unit tests of hydrator/dev: capture settings and the tail's rendering."""
