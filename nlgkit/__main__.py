"""``python -m nlgkit`` is the same as the ``nlgkit`` command."""

from nlgkit.cli.main import main

if __name__ == "__main__":
    main()
