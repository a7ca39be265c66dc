"""Prompts: seed entities, grids, templates, languages, prompt cases, candidates, roles.

Pure (stdlib, yaml, jsonschema): usable from a notebook or the simulated recommender
without pytest or httpx. Callers import from the module that defines a name.
"""
