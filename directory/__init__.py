"""Directory of contacts and their numbers: the card for a detection (see README)."""
