"""Comparisons across runs and models: models side by side, two stored runs test by test."""
