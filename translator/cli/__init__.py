"""The `translator` command. Each subcommand parses its options, folds them into the config
(one path for every option), calls one function and prints a short summary. Errors a user
can cause end with one line on stderr and exit code 2.

The modules register their commands on import, in `translator --help`'s order: the pipeline's."""

# isort: off
from translator.cli import prepare, train, distill, translating, deploy, inspect  # noqa: F401
from translator.cli.common import app

# isort: on


def main() -> None:
    app()


__all__ = ["app", "main"]
