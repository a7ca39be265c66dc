"""Recorded responses, one job per module (docs/architecture.md): ``store``, ``index``,
``vcrfile``, ``miss``, ``failures``, ``compact`` and ``cache``, the one content store.
Callers import from the module that defines a name."""
