"""report.html's per-scenario plots (eval/report/scenario_plots/<name>.py, iterated in the scenario registry's order):
for one comparison whose attribution has batch and hitlen sub-rows (built here, independent of any server), the
report's plots are byte for byte those of tests/eval/report/golden/scenario_plots.html, written by the report's
code before the plots moved into their scenarios' modules; and, read from the SVG itself rather than from that
file: which plots there are, their titles, categories, series and points."""

from __future__ import annotations

import html
import re
from dataclasses import replace
from pathlib import Path

import pytest

from eval.analyze.agreement import PairStats
from eval.analyze.attribution import Attribution, AttributionRow
from eval.analyze.attribution_rows import make_row
from eval.analyze.compare import Comparison, compare
from eval.analyze.score import ScoredRun, score_run
from eval.report.attribution import PLOT_MODULES, attribution_plots
from eval.report.scenario_plots import register_plots, unregister_plots
from eval.report.write import write_reports
from tests.eval.runfactory import base_and_variant, write_run

GOLDEN = Path(__file__).parent / "golden" / "scenario_plots.html"
ZERO = -9.0  # where a max delta of 0 is drawn (log10 axis)


def _pairs(n: int, equal: int, max_delta: float | None) -> PairStats:
    return PairStats("a", "b", n, n, equal, equal, equal, max_delta, 3, 0, 0, 0)


def _sub(pair_key: str, key: str, value: object, n: int, equal: int, delta: float | None) -> AttributionRow:
    return make_row(
        pair_key, key, key=key, level=1, value=value, measured=True, pairs=_pairs(n, equal, delta)
    )


def _attribution(rows: list[AttributionRow]) -> Attribution:
    return Attribution(["cache", "batch", "hitlen"], 1, 6, 6, rows, None)


# base: batch sizes 2 and 16, hit length 17; variant: batch sizes 2, 4 and 16 (16 sorts after 4 as a number),
# hit lengths 17 and 32; a delta of 0 (drawn at ZERO), a delta not measured (no point), an empty row (N 0)
BASE = [
    make_row("batch", "alone vs batch of 2, 16", measured=True, pairs=_pairs(12, 12, 0.0)),
    _sub("batch", "batch_b2", 2, 6, 6, 0.0),
    _sub("batch", "batch_b16", 16, 6, 6, 2e-5),
    _sub("batch_warm", "batch_warm_b2", 2, 6, 6, 1e-5),
    _sub("batch_warm", "batch_warm_b16", 16, 6, 5, None),
    make_row("hitlen", "primed prefix vs cold", measured=True, pairs=_pairs(6, 6, 0.0)),
    _sub("hitlen", "hitlen_L_17", "L = 17", 6, 6, 0.0),
]
VARIANT = [
    make_row("batch", "alone vs batch of 2, 4, 16", measured=True, pairs=_pairs(18, 16, 4e-5)),
    _sub("batch", "batch_b2", 2, 6, 6, 3e-5),
    _sub("batch", "batch_b4", 4, 6, 5, 4e-5),
    _sub("batch", "batch_b16", 16, 6, 5, 0.25),
    _sub("batch_warm", "batch_warm_b2", 2, 6, 6, 0.0),
    _sub("batch_warm", "batch_warm_b4", 4, 0, 0, None),
    _sub("batch_warm", "batch_warm_b16", 16, 6, 3, 1.5),
    make_row("hitlen", "primed prefix vs cold", measured=True, pairs=_pairs(12, 9, 0.5)),
    _sub("hitlen", "hitlen_L_17", "L = 17", 6, 6, 0.0),
    _sub("hitlen", "hitlen_L_32", "L = 32", 6, 3, 0.5),
]


def _with(run: ScoredRun, rows: list[AttributionRow]) -> ScoredRun:
    return replace(run, scores=replace(run.scores, attribution=_attribution(rows)))


def plotted(tmp_path: Path) -> Comparison:
    """Two runs of the test fixtures' builder, their attribution replaced by the rows above."""
    base, variant = base_and_variant(tmp_path)
    runs = tmp_path / "runs"
    c = compare(score_run(write_run(runs, base)), score_run(write_run(runs, variant)))
    return replace(c, base=_with(c.base, BASE), variant=_with(c.variant, VARIANT))


def svgs(page: str) -> list[str]:
    return re.findall(
        r'<svg viewBox="[^"]*" width="100%" role="img" aria-label="[^"]*" class="plot">.*?</svg>', page, re.S
    )


def report_plots(tmp_path: Path) -> list[str]:
    """The scenario plots of report.html as written for the comparison above."""
    _, _, page = write_reports(plotted(tmp_path), tmp_path / "out")
    return [
        s for s in svgs(page.read_text(encoding="utf-8")) if " by batch size" in s or " by hit length" in s
    ]


def test_the_report_holds_the_scenario_plots_as_before(tmp_path: Path) -> None:
    plots = report_plots(tmp_path)
    assert "\n".join(plots) + "\n" == GOLDEN.read_text(encoding="utf-8")


def _title(svg: str) -> str:
    return html.unescape(re.findall(r'class="plot-title">([^<]*)<', svg)[0])


def _legend(svg: str) -> list[str]:
    return [html.unescape(t) for t in re.findall(r'class="plot-legend">([^<]*)<', svg)]


def test_the_plots_are_the_scenarios_own(tmp_path: Path) -> None:
    """From the SVG: two plots per scenario (equality, then delta), batch before hitlen as the registry orders
    them; the batch sizes of either run in numeric order, the hit lengths in their first run's order."""
    plots = report_plots(tmp_path)
    assert [_title(s) for s in plots] == [
        "Equal outputs, alone vs in a batch, by batch size",
        f"Max |top-k logprob delta| by batch size (0 drawn at {ZERO:g})",
        "Equal outputs, primed prefix vs cold, by hit length",
        f"Max |top-k logprob delta| by hit length (0 drawn at {ZERO:g})",
    ]
    assert [_legend(s) for s in plots] == [["base cold", "base warm", "variant cold", "variant warm"]] * 2 + [
        ["base", "variant"]
    ] * 2
    for svg in plots[:2]:
        assert svg.index(">B = 2<") < svg.index(">B = 4<") < svg.index(">B = 16<")
    for svg in plots[2:]:
        assert svg.index(">L = 17<") < svg.index(">L = 32<")
    # each marker's tooltip: category, series, value (% equal; log10 of the max delta, 0 drawn at ZERO), worked
    # out by hand from the rows above; a sub-row a run did not measure, with N 0 or no delta has no marker
    assert [_marks(s) for s in plots] == [
        {
            "B = 2 base cold": "100", "B = 16 base cold": "100", "B = 2 base warm": "100",
            "B = 16 base warm": "83.33", "B = 2 variant cold": "100", "B = 4 variant cold": "83.33",
            "B = 16 variant cold": "83.33", "B = 2 variant warm": "100", "B = 16 variant warm": "50",
        },
        {
            "B = 2 base cold": f"{ZERO:g}", "B = 16 base cold": "-4.699", "B = 2 base warm": "-5",
            "B = 2 variant cold": "-4.523", "B = 4 variant cold": "-4.398", "B = 16 variant cold": "-0.6021",
            "B = 2 variant warm": f"{ZERO:g}", "B = 16 variant warm": "0.1761",
        },
        {"L = 17 base": "100", "L = 17 variant": "100", "L = 32 variant": "50"},
        {"L = 17 base": f"{ZERO:g}", "L = 17 variant": f"{ZERO:g}", "L = 32 variant": "-0.301"},
    ]  # fmt: skip


def _marks(svg: str) -> dict[str, str]:
    return dict(re.findall(r"<title>([^<:]*): ([^<]*)</title>", html.unescape(svg)))


def test_a_scenarios_plot_is_its_module_alone(tmp_path: Path) -> None:
    """The report draws the plots registered under each scenario's name, in the registry's order: a plot function
    registered for a scenario that has none (repeats) comes after hitlen's, with no other edit; a name is
    registered once, and only a registered scenario's."""
    assert PLOT_MODULES == ("eval.report.scenario_plots.batch", "eval.report.scenario_plots.hitlen")
    c = plotted(tmp_path)
    before = attribution_plots(c)
    register_plots("repeats", lambda _: ["<svg>repeats</svg>"])
    try:
        assert attribution_plots(c) == [*before, "<svg>repeats</svg>"]
        with pytest.raises(ValueError, match="scenario 'repeats' has two plot functions"):
            register_plots("repeats", lambda _: [])
    finally:
        unregister_plots("repeats")
    assert attribution_plots(c) == before and len(before) == 4
    with pytest.raises(ValueError, match="plot function 'nope': no scenario of that name is registered"):
        register_plots("nope", lambda _: [])
