"""tickets for the model slots' waiters, on PostgreSQL

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 23:20:00

Waiters for a model slot in several processes are served in the order of a ticket drawn from
this sequence (``server.pg_slots``). SQLite serves one process and needs none.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        # Lock keys are positive 31-bit numbers: the sequence cycles below 2**31.
        op.execute("CREATE SEQUENCE slot_tickets MAXVALUE 2147483647 CYCLE")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP SEQUENCE slot_tickets")
