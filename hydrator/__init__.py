"""toast-hydrator: keep the last full row per primary key, fill what CDC events leave out."""

__version__ = "0.1.0"
