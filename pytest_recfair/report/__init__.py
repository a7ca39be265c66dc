"""Fairness reports from ``AuditResult`` objects. Pure: no pytest, httpx or engine."""
