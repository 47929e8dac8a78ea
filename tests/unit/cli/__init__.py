"""Unit tests of hydrator/cli: options, environment and config file, help, commands' settings."""
