"""The speculative-decoding table of a comparison (a run against a server with a draft): per run, the drafts,
draft tokens and accepted tokens its own requests moved vLLM's counters by, the acceptance rate, the mean
acceptance length and the acceptance by draft position (eval/analyze/spec_decode.py). None when neither run
has speculative figures."""

from __future__ import annotations

from eval.analyze.compare import Comparison
from eval.analyze.spec_decode import SpecDecode
from eval.report.cells import Cell, Frac, Num, Row, Table, Text

__all__ = ["spec_decode_table"]


def _cells(d: SpecDecode | None) -> list[Cell]:
    if d is None:
        return [Text("no draft"), None, None, None, None, None]
    positions = " / ".join(f"{100 * r:.0f}%" for r in d.position_rates) or "n/a"
    rate = d.acceptance_rate
    return [
        Num(d.drafts, 0),
        Frac(d.accepted, d.draft_tokens),
        Num(None if rate is None else 100 * rate, 1, "%"),
        Num(d.mean_acceptance_length, 2),
        Text(positions),
        Text(f"{d.counted} counted, {d.foreign} foreign, {d.unmeasured} unmeasured"),
    ]


def spec_decode_table(c: Comparison) -> Table | None:
    base, variant = c.base.scores.spec_decode, c.variant.scores.spec_decode
    if base is None and variant is None:
        return None
    rows = [Row("base", f"base ({c.base.scores.run.variant})", _cells(base))]
    rows.append(Row("variant", f"variant ({c.variant.scores.run.variant})", _cells(variant)))
    columns = ["run", "drafts", "accepted / draft tokens", "acceptance rate", "mean acceptance length",
               "accepted by position", "requests"]  # fmt: skip
    shown = [f"{label} {100 * d.acceptance_rate:.1f}%" for label, d in (("base", base), ("variant", variant))
             if d is not None and d.acceptance_rate is not None]  # fmt: skip
    reading = (
        "Speculative decoding: acceptance " + ", ".join(shown) + "."
        if shown
        else "Speculative decoding: no draft token was counted."
    )
    note = (
        "From vLLM's spec_decode counters around each request (concurrency 1): a request whose server figures were "
        "another's is left out (foreign), one without figures is unmeasured. Mean acceptance length: 1 + accepted "
        "/ drafts (tokens a verification step yields). By position: accepted at draft position k / drafts."
    )
    return Table("spec_decode", "Speculative decoding (draft acceptance)", reading, columns, rows, note)
