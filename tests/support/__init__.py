"""Helpers shared by the tests: synthetic results, pytester projects, real cassettes.

Imported as ``tests.support.<module>`` (the repository root is on ``pythonpath``).
"""
