"""Migrations carry existing data forward, on both databases, and step back."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from alembic import command
from sqlalchemy import text

from server.db import repository
from server.db.migrate import alembic_config, current_revision, upgrade
from server.db.session import make_engine, make_session_factory


def test_a_turn_stored_before_0003_replays_and_conflicts_after_it(database_url: str) -> None:
    upgrade(database_url, "0002")
    engine = make_engine(database_url)
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO devices (id, label, token_hash, token_prefix, created_at) "
                "VALUES ('d1', 'old phone', 'h', 'p', CURRENT_TIMESTAMP)"
            )
        )
        connection.execute(
            text(
                "INSERT INTO conversations (id, device_id, external_id, created_at) "
                "VALUES (1, 'd1', 'c1', CURRENT_TIMESTAMP)"
            )
        )
        connection.execute(
            text(
                "INSERT INTO turns (id, device_id, conversation_id, client_message_id, "
                "created_at, state, message, reply, category, rules, topics, model_called, "
                "response) VALUES (7, 'd1', 1, 'm1', CURRENT_TIMESTAMP, 'done', "
                "'le chien aboie', 'Notez-le.', 'rien', '[]', '[]', false, '{\"text\": \"Notez-le.\"}')"
            )
        )
        if connection.dialect.name == "postgresql":  # ids given by hand: move the sequences
            connection.execute(text("SELECT setval('turns_id_seq', 7)"))
            connection.execute(text("SELECT setval('conversations_id_seq', 1)"))
    engine.dispose()
    upgrade(database_url)
    assert current_revision(database_url) == "0005"  # the head: every later revision applies too
    engine = make_engine(database_url)
    claim: dict[str, Any] = {"category": "rien", "rules": [], "topics": [], "region": None}
    with make_session_factory(engine)() as session:
        key = repository.TurnKey("d1", "c1", "m1")
        same = repository.claim_turn(
            session, key=key, message="le chien  aboie", lease=timedelta(seconds=15), **claim
        )
        other = repository.claim_turn(
            session, key=key, message="au feu", lease=timedelta(seconds=15), **claim
        )
        fresh = repository.claim_turn(
            session,
            key=repository.TurnKey("d1", "c1", "m2"),
            message="bonjour",
            lease=timedelta(seconds=15),
            **claim,
        )
    engine.dispose()
    assert (same.state, same.claimed, same.response) == ("done", False, {"text": "Notez-le."})
    assert other.state == "conflict"
    assert fresh.claimed
    assert fresh.turn_id > 7
    command.downgrade(alembic_config(database_url), "0002")
    assert current_revision(database_url) == "0002"
    upgrade(database_url)
