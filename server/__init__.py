"""The chat API, its settings, persistence and command line (see README)."""
