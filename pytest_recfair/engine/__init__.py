"""Fairness audits without pytest: run one, judge it, keep a run's results.

- :mod:`.base` defines an :class:`AuditRequest` (one audit to run, built once by the
  caller) and what a kind of audit is (:class:`AuditKind`); :mod:`.registry` lists the
  kinds: :mod:`.overlap` (list overlap, the default), :mod:`.items` (item side),
  :mod:`.positions` (candidate position);
- :mod:`.pipeline` runs one audit; :mod:`.stream` sends its prompts a chunk of entities
  at a time into the kind's scorer (:mod:`.pooled`: the scorer of kinds that score
  across entities);
- :mod:`.sharding` splits an audit across CI jobs and merges it back (shard files too);
- :mod:`.batch` records missing prompts through a provider's batch API;
- :mod:`.planning` / :mod:`.budget` the plan and budget before anything is sent;
- :mod:`.verdict` holds the baseline state, the gate and the pure :func:`judge`;
- :mod:`.record` holds a run's bookkeeping (payloads, JUnit properties, collector);
- :mod:`.changes` says what --fairness-update changed and which baselines no test used.
"""
