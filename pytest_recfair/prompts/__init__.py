"""Prompts: seed entities, attribute grids, templates, languages, prompt cases, roles.

Pure: stdlib, yaml and jsonschema only, so it can be used from a notebook or by the
simulated recommender without pytest or httpx. Callers import from the module that
defines a name: ``seeds`` (entities, subsampling, the docs' example files), ``grids``,
``templates`` (template sets, the ``role=`` persona), ``languages`` (translation tables,
value phrases, typos), ``cases`` (``build_cases``, ``match_prompt``), ``candidates``,
``roles`` (role-play questions).
"""
