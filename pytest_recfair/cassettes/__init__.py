"""Recorded responses: the store, the record-mode policy, vcrpy import, pruning."""
