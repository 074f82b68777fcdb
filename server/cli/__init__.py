"""The ``nuisances`` command line: one Typer application, one module per sub-command group."""

from __future__ import annotations

import typer

from server.cli.directory_commands import app as directory_app
from server.cli.safety_commands import app as safety_app

app = typer.Typer(
    name="nuisances",
    help="Backend of the journal des nuisances assistant.",
    no_args_is_help=True,
    add_completion=False,
)
app.add_typer(safety_app, name="safety")
app.add_typer(directory_app, name="directory")


def main() -> None:
    """Console entry point."""
    app()
