"""Row-image state: the record layout and its codec, and the stores that hold it."""

import hydrator  # noqa: F401  first: it picks the compiled or interpreted modules
from state.record import StateRecord

__all__ = ["StateRecord"]
