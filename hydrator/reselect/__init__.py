"""The re-select fallback both engines share (docs/cold-start.md, "Re-select fallback"): its
settings (settings.py), which records leave columns only the source can fill (misses.py), and
the client that reads them from Postgres (client.py). What a read value may say is a rule of the
core (hydrator/core/reselected.py); each engine's step around these is its own
(hydrator/engines/embedded/reselect_step.py, hydrator/engines/spark/reselect.py)."""
