"""Unit tests of bench/: the workloads, the report and the profiles."""
