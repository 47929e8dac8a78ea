"""`python -m hydrator.cli ...`: as the `hydrator` console script."""

from hydrator.cli import main

# Guarded: a `--workers` process (multiprocessing's spawn) imports this module again, as
# `__mp_main__`, and must not start a second CLI.
if __name__ == "__main__":
    main()
