"""Fairness audits without pytest (docs/architecture.md): import from the module that
defines a name; this package re-exports nothing."""
