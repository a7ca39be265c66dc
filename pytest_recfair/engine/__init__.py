"""Fairness audits without pytest: run one, judge it, keep a run's results.

- :mod:`.base` defines an :class:`AuditRequest` (one audit to run, built once by the
  caller), what a kind of audit is (:class:`AuditKind`; :class:`PooledKind` for kinds
  that score across entities) and a shard's data; :mod:`.registry` lists the kinds:
  :mod:`.overlap` (list overlap, the default), :mod:`.items` (item side),
  :mod:`.positions` (candidate position), :mod:`.roleplay` (role play);
- :mod:`.pipeline` runs one audit; :mod:`.stream` sends its prompts a chunk of entities
  at a time into the kind's scorer (:mod:`.replaymemo`: a replay of unchanged inputs
  served whole from the content store);
- :mod:`.sharding` splits an audit across CI jobs and merges it back (shard files too);
- :mod:`.batch` records missing prompts through a provider's batch API;
- :mod:`.plan` the plan and budget before anything is sent;
- :mod:`.verdict` holds the baseline state, the gate and the pure :func:`judge`;
- :mod:`.collector` holds a run's bookkeeping (payloads, collector, what --fairness-update
  changed and which baselines no test used).
"""
