"""The gate's decisions, as data: limits (stdlib only), thresholds, drift against a baseline,
baseline files, unanswered prompts. Failures are ``results.GateFailure`` records; their
words are ``report.failures``'s (no module here imports ``report``)."""
