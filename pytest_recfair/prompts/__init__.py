"""Prompts: seed entities, grids, templates, languages, prompt cases, candidates, roles.
Pure (stdlib, yaml, jsonschema): usable without pytest or httpx."""
