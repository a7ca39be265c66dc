"""Recorded responses, one job per module (docs/architecture.md)."""
