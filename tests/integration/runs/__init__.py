"""`hydrator run` on either engine: start-up checks, bad runs, poison records, size limits."""
