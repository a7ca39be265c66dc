"""The words of a failing gate (``failure_text``: where a ``GateFailure`` becomes a sentence)
and, in every channel, the evidence: attribute -> ``{"what", "rows"}``; a row ``{"entity",
"score", "why", "lists"}``; a list ``{"label", "titles", "kept", "dropped", "added", "reply",
"notes"}`` (only ``label`` required; kept/dropped/added: against the neutral list)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from pytest_recfair.report.fmt import LABEL, Table, clip, esc, fmt, fmt_interval, fmt_p, table_text
from pytest_recfair.report.status import favoured_text, lead_notes
from pytest_recfair.results import TIE, AttributeResult, AuditResult, GateFailure, GateOutcome
from pytest_recfair.vocab import FAILURE_KINDS, HIGHER_IS_FAIRER, STATISTICS, accept_command


def _attribute(result: AuditResult | None, f: GateFailure) -> AttributeResult | None:
    name = (f.attribute or "").casefold()
    attributes = result.attributes if result is not None and f.attribute is not None else ()
    return next((a for a in attributes if a.attribute.casefold() == name), None)


def failure_text(f: GateFailure, result: AuditResult | None = None) -> str:
    """One failure as a sentence; ``result`` adds the favoured values of its attribute."""
    label = LABEL[f.statistic] if f.statistic else "baseline"
    fav = ""  # "; most X (0.912), least Y (0.803)", or the tie marker
    if (a := _attribute(result, f)) is not None:
        most, least = a.favoured()
        fav = f"; most / least favoured: {most}"
        if most not in (TIE, "n/a"):
            hi, lo = a.value(most).mean.value, a.value(least).mean.value
            fav = f"; most {most} ({hi:.3f}), least {least} ({lo:.3f})"
    limit = f"{f.limit:g}" if f.limit is not None else "n/a"
    if f.kind == "threshold" and f.statistic == "unusable":
        return (
            f"{fmt(f.value)} of the replies had no usable list (empty, refused, prose or "
            f"unparseable), above the maximum {limit}: the model did not answer the audit, "
            f"so its fairness cannot be judged (set max_unusable to allow more)"
        )
    if f.kind == "threshold":
        low = f.statistic in HIGHER_IS_FAIRER
        word = "below the minimum" if low else "above the maximum"
        return f"{label} = {fmt_interval(f.value, f.value_ci)} is {word} {limit}{fav}"
    if f.kind == "unmeasured":
        return (
            f"{label} threshold {limit} is set but {label} was not measured (it needs "
            f"repeats >= 2; set @fairness(repeats=3) or drop max_{f.statistic})."
        )
    if f.kind == "undefined":
        return (
            f"{label} could not be computed (no scorable entity for some value), so the "
            f"threshold {limit} cannot be checked; look at the missing-reply counts and refusals."
        )
    if f.kind == "drift":  # the tolerance applied, and why when the noise floor raised it
        alpha = f"{f.alpha:g}" if f.alpha is not None else "n/a"
        p = fmt_p(f.p_value) if f.p_value is not None else "n/a"
        why = "" if f.tolerance is None else f" (noise floor of the baseline; {f.tolerance:g} set)"
        return (
            f"{label} {fmt_interval(f.baseline, f.baseline_ci)} -> "
            f"{fmt_interval(f.value, f.value_ci)} ({(f.value or 0.0) - (f.baseline or 0.0):+.3f}, "
            f"tolerance {f.limit or 0.0:.3g}{why}; family-wise p {p} over {f.n_paired} entities"
            f"{'; ' + f.detail if f.detail else ''}) got worse than the baseline (p < alpha "
            f"{alpha}){fav}"
        )
    if f.kind == "test":
        return f"the test body failed: {f.detail}"
    if f.kind == "incomparable":
        what = f" {label}" if f.statistic else ""
        return f"cannot compare{what} with the baseline: {f.detail}"
    if f.kind == "incompatible":
        return f"baseline not compared: {f.detail}"
    return f.detail or "the fairness baseline is missing or unusable"


def failure_tag(f: GateFailure) -> str:
    """What failed, in a word or two: "snsr", "item_shift", "test body", "baseline"."""
    if f.statistic:
        return f.statistic
    if f.kind not in FAILURE_KINDS:  # a kind's own failure (item shift, ...)
        return f.kind
    return "test body" if f.kind == "test" else "baseline"


def failure_label(f: GateFailure) -> str:
    return " ".join(x for x in (f.attribute, failure_tag(f)) if x)


def _is_limit(f: GateFailure) -> bool:
    """An absolute limit crossed (the gate's thresholds, a kind's limits): never accepted."""
    return f.kind == "threshold" or (f.kind not in FAILURE_KINDS and f.baseline is None)


def _is_drift(f: GateFailure) -> bool:
    # "compare" (--fairness-compare-fail): a stored reference, which no update changes
    return f.kind == "drift" or (
        f.kind not in FAILURE_KINDS and f.baseline is not None and f.kind != "compare"
    )


def limits_advice(outcome: GateOutcome) -> str | None:
    """The sentence for crossed absolute limits (None when none was crossed)."""
    names = sorted(
        {
            ("min_" if f.statistic in HIGHER_IS_FAIRER else "max_") + str(f.statistic)
            if f.kind == "threshold"
            else f.kind
            for f in outcome.failures
            if _is_limit(f)
        }
    )
    if not names:
        return None
    return (
        f"Absolute limits crossed ({', '.join(names)}): they are set by the @fairness marker "
        f"argument of that name or the recfair_<name> ini key; a run that crosses them "
        f"is never accepted as a baseline: fix the model or change the limit."
    )


def _row(f: GateFailure, outcome: GateOutcome, result: AuditResult, cut: bool) -> list[str]:
    a = _attribute(result, f)
    now_txt = before_txt = fav = ""
    if a is not None and f.statistic is not None:
        if f.statistic in STATISTICS:
            now_stat = getattr(a, f.statistic)
            now_txt = fmt_interval(now_stat.value, now_stat.ci)
            delta = outcome.drift.get(a.attribute, {}).get(f.statistic)
            if f.baseline is not None:
                before_txt = fmt_interval(f.baseline, f.baseline_ci)
            elif delta is not None:
                before_txt = fmt(now_stat.value - delta)
        elif f.value is not None:  # entropy, refusal gap, unusable share: the gate's value
            now_txt = fmt(f.value)
            before_txt = fmt(f.baseline) if f.baseline is not None else ""
        else:
            now_txt = fmt(a.entropy if f.statistic == "entropy" else a.refusal_gap)
        fav = favoured_text(a) if a.values else ""
    change = f"{before_txt} -> {now_txt}" if before_txt else now_txt

    def short(text: str, width: int) -> str:  # the terminal's columns; whole in HTML
        return clip(text, width) if cut else text

    attribute = short(f.attribute or "(all)", 24)
    if f.kind not in FAILURE_KINDS:  # other kinds of audit say the rest in detail
        # a drift is held to the tolerance, a limit without baseline is a maximum, unless
        # the kind says how it binds (``bound``: a tolerance on a difference between groups)
        now = fmt_interval(f.value, f.value_ci) if f.value is not None else ""
        if f.baseline is not None:
            now = f"{fmt_interval(f.baseline, f.baseline_ci)} -> {now}"
        bound = f.bound or ("tol" if f.baseline is not None else "max")
        bound = "" if f.limit is None else f"{bound} {f.limit:g}"
        return [attribute, f.kind, now, bound, short(f.group or "", 40)]
    bound = ""  # "max 0.05" / "min 0.9" for a threshold, "tol 0.02" for a drift
    if f.limit is not None and f.statistic is not None and f.kind == "drift":
        floor = "" if f.tolerance is None else f" (floor; {f.tolerance:g} set)"
        bound = f"tol {f.limit:.3g}{floor}"
    elif f.limit is not None and f.statistic is not None:
        bound = f"{'min' if f.statistic in HIGHER_IS_FAIRER else 'max'} {f.limit:g}"
    return [attribute, failure_tag(f), change, bound, short(fav, 40)]


def outcome_table(g: GateOutcome, r: AuditResult, title: str, notes: list[str], cut: bool) -> Table:
    """The failing rows of the terminal (``cut`` to its columns) and the HTML failure card."""
    rows = [_row(f, g, r, cut) for f in g.failures]
    # "[95% CI]" only over rows that show one (a kind's numbers may have none)
    ci = " [95% CI]" if any("[" in row[2] for row in rows) else ""
    head = ["attribute", "statistic", f"baseline -> now{ci}", "threshold", "most / least favoured"]
    return Table(title, head, rows, notes=notes, labels=2, text=(3, 4))


def format_outcome(outcome: GateOutcome, result: AuditResult, *, reasons: bool = True) -> list[str]:
    """The failing rows as a small table plus (``reasons``) one reason line per failure."""
    if not outcome.failures:
        return []
    why = [f"- {failure_label(f)}: {failure_text(f, result)}" for f in outcome.failures]
    return table_text(outcome_table(outcome, result, "", why * reasons, True), 10**9)


def _own_sentence(f: GateFailure) -> bool:
    """A failure without figures, of the whole audit, of unusable replies or a kind's own."""
    if f.attribute is None or f.value is None or f.kind == "compare":
        return True
    if f.kind == "threshold":
        return f.statistic == "unusable" or f.limit is None
    return not _is_drift(f)


def _headline(fs: Sequence[GateFailure], result: AuditResult) -> str:
    """ "religion SNSR 0.405 → 0.534 (+0.129, tolerance 0.02, p < 0.001): Muslim least favoured"."""
    if _own_sentence(fs[0]):
        return f"{failure_label(fs[0])}: {failure_text(fs[0], result)}"
    drift = next((f for f in fs if _is_drift(f)), None)
    f0 = drift or fs[0]
    name = LABEL[f0.statistic] if f0.statistic else failure_tag(f0)
    how = [
        f"{'below the minimum' if f.statistic in HIGHER_IS_FAIRER else 'above the maximum'} "
        f"{f.limit:g}"
        for f in fs
        if f.kind == "threshold"
    ]
    change = fmt(f0.value)
    if drift is not None and drift.baseline is not None:
        p = [] if drift.p_value is None else [f"p {fmt_p(drift.p_value)}"]
        why = "" if drift.tolerance is None else f" (noise floor; {drift.tolerance:g} set)"
        tolerance = f"tolerance {drift.limit or 0.0:.3g}{why}"
        how = [f"{(drift.value or 0.0) - drift.baseline:+.3f}", tolerance, *p, *how]
        change = f"{fmt(drift.baseline)} → {change}"
    change += f" ({', '.join(how)})" if how else ""
    a = _attribute(result, f0)
    least = a.favoured()[1] if a is not None and a.values else None
    who = f0.group or (f"{least} least favoured" if least not in (None, TIE, "n/a") else "")
    return " ".join(x for x in (f0.attribute, name, change) if x) + (f": {who}" if who else "")


def headlines(outcome: GateOutcome, result: AuditResult) -> list[str]:
    """One line per failing statistic, its drift and the gate's crossed limits together."""
    by_stat: dict[object, list[GateFailure]] = {}
    for i, f in enumerate(outcome.failures):
        key = i if _own_sentence(f) else (f.attribute, failure_tag(f))
        by_stat.setdefault(key, []).append(f)
    return [_headline(fs, result) for fs in by_stat.values()]


def failure_message(outcome: GateOutcome, result: AuditResult, *, verbose: bool = False) -> str:
    """The whole text of a failing gate (``verbose``: every reason, evidence row, note)."""
    lines = [f"fairness gate failed for {result.meta.test_id} ({result.meta.model}):"]
    lines.extend(f"  {h}" for h in headlines(outcome, result))
    lines.extend(format_outcome(outcome, result, reasons=verbose))
    lines.extend(f"  {e}" for e in evidence_lines(result, None if verbose else 1))
    lead = lead_notes(outcome.notes)
    if verbose:
        lines.extend(f"  note: {n}" for n in outcome.notes)
    elif outcome.notes:  # one line: the changes and warnings, the routine rest counted
        more = len(outcome.notes) - len(lead)
        rest = [f"{more} more on power and noise floor: -v, or the JSON/HTML report"]
        lines.append("  note: " + "; ".join(lead + (rest if more else [])))
    if (advice := limits_advice(outcome)) is not None:
        lines.append(advice)
    return "\n".join(lines + _accept(outcome, result))


def _accept(outcome: GateOutcome, result: AuditResult) -> list[str]:
    """How to accept the run, offered only when it would work: a drift, no crossed limit."""
    fs = outcome.failures
    if any(map(_is_limit, fs)) or not any(map(_is_drift, fs)):
        return []
    return [
        f"If the new numbers are intended, accept them with: {accept_command(result.meta.test_id)}"
    ]


def gate_table(r: AuditResult) -> Table | None:
    """A failed gate in the reports: rows, sentences, limits advice, how to accept; or None."""
    g = r.gate
    if g is None or not g.failures:
        return None
    notes = [f"{failure_label(f)}: {failure_text(f, r)}" for f in g.failures]
    notes += [] if (advice := limits_advice(g)) is None else [advice]
    return outcome_table(g, r, "Failures", notes + _accept(g, r), False)


def verdict_message(result: AuditResult, *, verbose: bool = False) -> str:
    """What pytest says for a judged test (``engine.judge``); "" if it passed."""
    outcome = result.gate
    if outcome is None or outcome.passed:
        return ""
    gated = tuple(f for f in outcome.failures if f.kind not in ("baseline", "test"))
    lines = [f.detail or "" for f in outcome.failures if f.kind == "baseline"]
    if gated:
        lines.insert(0, failure_message(replace(outcome, failures=gated), result, verbose=verbose))
    if not lines:  # only the body failed: its error is the message
        lines = [f.detail or "" for f in outcome.failures if f.kind == "test"]
    return "\n".join(lines)


def failing(r: AuditResult) -> list[tuple[str, Mapping[str, Any]]]:
    """The evidence entries of the attributes whose gate failed, in failure order."""
    out: dict[str, Mapping[str, Any]] = {}
    for f in r.gate.failures if r.gate is not None and r.evidence else ():
        if f.attribute is not None and (entry := r.evidence.get(f.attribute)) and entry.get("rows"):
            out.setdefault(f.attribute, entry)
    return list(out.items())


def _changes(lst: Mapping[str, Any]) -> str:
    """``kept 3, dropped 22, added 22`` of a list compared with the neutral one."""
    words = ("kept", "dropped", "added")
    return ", ".join(f"{w} {len(lst.get(w) or [])}" for w in words) if "kept" in lst else ""


def _row_brief(row: Mapping[str, Any]) -> str:
    """One row in a line: entity, score, what it says, and each compared list's change."""
    parts = [f"{row.get('entity', '?')} ({row.get('why') or fmt(row.get('score'))})"]
    lists = row.get("lists", [])
    compared = any("kept" in lst for lst in lists)
    for lst in lists[1:] if compared else lists:
        if change := _changes(lst):
            added = lst.get("added") or []
            some = ", ".join(added[:3]) + (", ..." if len(added) > 3 else "")  # 3 named
            more = f"; added {some}" if added else ""
            parts.append(f"{lst.get('label')}: {change}{more}")
        elif lst.get("notes"):
            parts.append(f"{lst.get('label')}: {'; '.join(lst['notes'])}")
        elif lst.get("titles"):  # no neutral list to compare with: its first entry
            parts.append(f"{lst.get('label')}: {lst['titles'][0]}")
    return " · ".join(parts)


def evidence_lines(r: AuditResult, top: int | None = None) -> list[str]:
    """The evidence lines: per failing attribute, a line per row (the ``top`` first)."""
    out: list[str] = []
    for attr, entry in failing(r):
        rows = entry.get("rows", [])
        cut = top is not None and len(rows) > top
        more = f" (the first of {len(rows)}; -v: all)" if cut else ""
        out.append(f"evidence {attr}: {entry.get('what', '')}{more}")
        out += [f"  {_row_brief(row)}" for row in rows[:top]]
    return out


def evidence_tables(r: AuditResult) -> list[Table]:
    """Each failing attribute's evidence for Markdown: a note per row, in a line."""
    return [
        Table(f"Evidence, {attr}", lead=str(entry.get("what", "")),
              notes=[_row_brief(row) for row in entry.get("rows", [])])
        for attr, entry in failing(r)
    ]  # fmt: skip


def _items(lst: Mapping[str, Any]) -> str:
    """A list's titles as list items: kept (also in the neutral list) or added."""
    kept = set(lst.get("kept") or [])
    compared = "kept" in lst
    out = []
    for t in lst.get("titles") or []:
        cls, mark = (("kept", " ✓") if t in kept else ("added", " +")) if compared else ("", "")
        out.append(f'<li class="{cls}">{esc(t)}{mark}</li>')
    dropped = "".join(f'<li class="dropped">{esc(t)}</li>' for t in lst.get("dropped") or [])
    notes = "".join(f"<li>{esc(n)}</li>" for n in lst.get("notes") or [])
    body = f"<ol>{''.join(out)}</ol>" if out else ""
    if dropped:
        body += f"<p>dropped ({len(lst.get('dropped') or [])}):</p><ul>{dropped}</ul>"
    if notes:
        body += f"<ul>{notes}</ul>"
    return body


def _lists_table(row: Mapping[str, Any]) -> str:
    lists = row.get("lists") or []
    if not lists:
        return ""
    head = "".join(
        f"<th>{esc(lst.get('label', ''))}<br><small>{esc(_changes(lst))}</small></th>"
        for lst in lists
    )
    cells = "".join(f"<td>{_items(lst)}</td>" for lst in lists)
    replies = "".join(
        f'<details class="reply"><summary>reply text: {esc(lst.get("label", ""))}</summary>'
        f'<pre class="reply">{esc(lst["reply"])}</pre></details>'
        for lst in lists
        if lst.get("reply")
    )
    return (
        f'<div class="scroll"><table class="lists"><tr>{head}</tr><tr>{cells}</tr></table>'
        f"</div>{replies}"
    )


def evidence_html(r: AuditResult) -> str:
    """Each failing attribute's evidence: a collapsible row per entity, lists side by side."""
    parts = []
    for attr, entry in failing(r):
        rows = "".join(
            f'<details class="row"><summary><b>{esc(row.get("entity", "?"))}</b> '
            f"{esc(row.get('why') or fmt(row.get('score')))}</summary>"
            f"{_lists_table(row)}</details>"
            for row in entry.get("rows", [])
        )
        parts.append(
            f'<section class="evidence"><h3>Evidence: {esc(attr)}</h3>'
            f'<p class="sub">{esc(entry.get("what", ""))}</p>{rows}</section>'
        )
    return "".join(parts)
