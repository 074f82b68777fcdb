"""The ``nuisances`` command line: one Typer application, one module per sub-command group."""

from __future__ import annotations

import typer

from server.cli.bench_command import bench_app
from server.cli.chat_command import chat
from server.cli.directory_commands import app as directory_app
from server.cli.doctor_command import doctor
from server.cli.ops_commands import db_app, serve, tokens_app
from server.cli.safety_commands import app as safety_app

app = typer.Typer(
    name="nuisances",
    help="Backend of the journal des nuisances assistant.",
    no_args_is_help=True,
    add_completion=False,
)
app.command()(serve)
app.command()(chat)
app.command()(doctor)
app.add_typer(tokens_app, name="tokens")
app.add_typer(db_app, name="db")
app.add_typer(safety_app, name="safety")
app.add_typer(directory_app, name="directory")
app.add_typer(bench_app, name="bench")


def main() -> None:
    """Console entry point."""
    app()
