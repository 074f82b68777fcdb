"""idempotency per conversation with a message hash, turn leases, quota usage, cache tags

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01 19:00:00

The turns and conversations tables are rebuilt on SQLite (batch mode) to take AUTOINCREMENT,
so that an id is never given again after an erasure.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    if sqlite:  # PostgreSQL sequences never give an id again; SQLite needs AUTOINCREMENT
        with op.batch_alter_table(
            "conversations", recreate="always", table_kwargs={"sqlite_autoincrement": True}
        ):
            pass
    with op.batch_alter_table(
        "turns",
        recreate="always" if sqlite else "auto",
        table_kwargs={"sqlite_autoincrement": True},
    ) as batch_op:
        batch_op.add_column(sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("message_hash", sa.String(length=64), nullable=True))
        batch_op.drop_constraint("uq_turns_device_id", type_="unique")
        batch_op.create_unique_constraint(
            batch_op.f("uq_turns_device_id"), ["device_id", "conversation_id", "client_message_id"]
        )
    op.create_table(
        "quota_usage",
        sa.Column("day", sa.String(length=10), nullable=False),
        sa.Column("scope", sa.String(length=64), nullable=False),
        sa.Column("calls", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("day", "scope", name=op.f("pk_quota_usage")),
    )
    # Entries cached before this revision carry no conversation: they cannot be erased with
    # one, and they were shared across devices. Drop them (a cache is only a cache).
    op.execute("DELETE FROM answer_cache")
    with op.batch_alter_table("answer_cache") as batch_op:
        batch_op.add_column(
            sa.Column("conversation", sa.String(length=64), nullable=False, server_default="")
        )
        batch_op.create_index(batch_op.f("ix_answer_cache_conversation"), ["conversation"])


def downgrade() -> None:
    with op.batch_alter_table("answer_cache") as batch_op:
        batch_op.drop_index(batch_op.f("ix_answer_cache_conversation"))
        batch_op.drop_column("conversation")
    op.drop_table("quota_usage")
    with op.batch_alter_table("turns") as batch_op:
        batch_op.drop_constraint("uq_turns_device_id", type_="unique")
        batch_op.create_unique_constraint(
            batch_op.f("uq_turns_device_id"), ["device_id", "client_message_id"]
        )
        batch_op.drop_column("message_hash")
        batch_op.drop_column("lease_until")
