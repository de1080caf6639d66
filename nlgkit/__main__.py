"""``python -m nlgkit`` is the same as the ``nlgkit`` command."""

from nlgkit.cli.main import app

if __name__ == "__main__":
    app(prog_name="nlgkit")
