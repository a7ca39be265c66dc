"""Fairness reports: the terminal summary, JSON, Markdown, a self-contained HTML page and
JUnit XML properties, rendered from ``AuditResult`` objects (with their gate outcome).

Pure: no pytest, no httpx, and never the engine (a result names its kind; the kinds'
registry hands :mod:`.sections` the lookup of their report sections). One module per
format and job; import from the module that defines a name. See docs/reports.md.
"""
