"""Entry script for `spark-submit` (see __init__.py); the arguments are `hydrator`'s."""

from hydrator.cli import main

if __name__ == "__main__":
    main()
