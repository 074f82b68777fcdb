"""Persistence: SQLAlchemy 2.0 models, engine and sessions, Alembic migrations, repositories."""
