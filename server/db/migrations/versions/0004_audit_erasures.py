"""erasures to apply to every machine's audit files

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01 22:10:00

An erasure is served by one machine, but every machine keeps audit files of its own: the
conversation's keyed hash is recorded here, in the erasure's transaction, and every process
applies the erasures it has not applied yet to the files of its machine.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "audit_erasures",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("conversation", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_erasures")),
        sqlite_autoincrement=True,
    )
    op.create_index(op.f("ix_audit_erasures_created_at"), "audit_erasures", ["created_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_audit_erasures_created_at"), table_name="audit_erasures")
    op.drop_table("audit_erasures")
