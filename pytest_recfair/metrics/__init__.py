"""The scoring core: list similarities, attribute aggregates, their uncertainty and the
other kinds of audit's statistics. Pure numpy + stdlib; callers import from the module
that defines a name (docs/architecture.md lists them, docs/metrics.md the formulas)."""
