"""Row-image state: the record layout and its codec, and the stores that hold it."""

from state.record import StateRecord

__all__ = ["StateRecord"]
