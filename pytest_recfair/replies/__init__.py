"""Replies read: list parsing, title matching, catalogue matching."""
