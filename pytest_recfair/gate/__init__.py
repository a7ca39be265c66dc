"""The gate's decisions: thresholds, drift against a baseline, baseline files, the verdict."""
