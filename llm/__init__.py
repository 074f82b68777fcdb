"""Model layer: providers, budgets, admission, fallback, prompt building (see README)."""
