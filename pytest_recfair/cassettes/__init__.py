"""Recorded responses, one job per module: ``store`` (the per-entity cassette store),
``policy`` (what each record mode does), ``vcrfile`` (the vcrpy file format, scrubbed on
write), ``index`` (the replay index and lookup keys), ``miss`` (what a miss says),
``vcr_import`` (cassettes recorded by vcrpy) and ``cache`` (the one content
store of a replay's results). Callers import from ``store``, which re-exports the rest."""
