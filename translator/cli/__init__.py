"""The `translator` command. Each subcommand parses its options, folds them into the config
(one path for every option), calls one function and prints a short summary. Errors a user
can cause end with one line on stderr and exit code 2."""

from translator.cli import build, look, serve, use  # noqa: F401 - registers the subcommands
from translator.cli.common import app


def main() -> None:
    app()


__all__ = ["app", "main"]
