"""Unit tests of hydrator/ops: config show's output, log lines."""
