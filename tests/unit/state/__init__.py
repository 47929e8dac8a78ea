"""Unit tests of state/: the stores, the cache, layout, large and oversize values."""
