"""Unit tests of hydrator/engines/embedded: the task, the loop's parts, workers, the watchdog."""
