"""The attribution table in scores.md/scores.json and in the comparison reports (table 5), its reading (with
confounding stated), its plots in report.html, and the scenario gate rules on the same runs."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from eval.analyze.compare import Comparison, compare
from eval.analyze.score import ScoredRun, score_run
from eval.gate.policy import load_policy, parse_policy
from eval.gate.rules import evaluate
from eval.gate.verdict import FAIL, NO_DATA, PASS, SKIPPED
from eval.report.attribution import attribution_plots, attribution_table, run_attribution_table
from eval.report.cells import Frac, Sci, Text, cell_json
from eval.report.json_out import scores_json
from eval.report.tables import build_tables
from eval.report.write import write_reports, write_scores
from eval.run.runner import execute_run
from eval.run.scenarios.settings import ScenarioSettings
from tests.eval.batch_hook import announced_batches
from tests.eval.fake_fixtures import config_for, make_row, write_rows
from tests.support.fake_server import BatchEffect, FakeServer, PrefixEffect

JITTER = 4e-5
WORDS = (40, 47)


def make_run(
    tmp: Path, variant: str, scenarios: ScenarioSettings, knobs: dict[str, Any], **kw: Any
) -> ScoredRun:
    inputs = write_rows(tmp / "inputs.jsonl", [make_row(i, words=w) for i, w in enumerate(WORDS)])
    with FakeServer() as fake:
        for attr, value in knobs.items():
            setattr(fake, attr, value)
        config = config_for(
            fake, inputs, tmp / "runs", variant=variant, passes=("cold", "warm", "repeat"), **kw
        )
        with announced_batches(fake):
            return score_run(execute_run(replace(config, scenarios=scenarios)))


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Comparison:
    """Base: cache only. Variant: cache, batch (a batch effect on), hitlen (the 32-token hit dropped)."""
    tmp = tmp_path_factory.mktemp("attribution-report")
    base = make_run(tmp, "base", ScenarioSettings(), {})
    knobs = {
        "batch_effect": BatchEffect(window_s=None, jitter=JITTER),
        "prefix_effect": PrefixEffect(drop_hit_at=frozenset({32})),
    }
    s = ScenarioSettings(scenarios=("cache", "batch", "hitlen"), batch_sizes=(1, 2), hit_lengths=(17, 32))
    return compare(base, make_run(tmp, "variant", s, knobs))


def cells(table: Any, key: str) -> dict[str, Any]:
    row = next(r for r in table.rows if r.key == key)
    return dict(zip(table.columns[1:], row.cells, strict=True))


def test_scores_md_and_json_hold_the_attribution(pair: Comparison, tmp_path: Path) -> None:
    variant = pair.variant
    table = run_attribution_table(variant.scores)
    assert table is not None and table.id == "attribution"
    batch = cells(table, "batch_b2")
    assert batch["equal outputs (text)"] == Frac(2, 2)  # the jitter leaves the tokens alone
    max_delta = batch["max |top-k logprob delta|"]
    assert isinstance(max_delta, Sci) and max_delta.value is not None and abs(max_delta.value - JITTER) < 1e-6
    assert cells(table, "hitlen_L_32")["primed hits honoured"] == Frac(0, 2)
    assert cells(table, "hitlen_L_17")["primed hits honoured"] == Frac(2, 2)
    assert cells(table, "repeats")["equal outputs (text)"] == Text("not run")
    assert "batch composition (alone vs batch of 2)" in table.reading and "hits honoured 2/4" in table.reading
    assert "Not run: repeats, traffic, replicas." in table.reading
    json_path, md_path = write_scores(variant)
    md = md_path.read_text()
    assert "### Attribution: what caused each difference" in md and "· 2B" not in md
    assert "| · alone vs batch of 2 |" in md and "| · L=32: L = 32 |" in md
    data = json.loads(json_path.read_text())
    assert data == json.loads(json.dumps(scores_json(variant)))
    rows = {r["key"]: r for r in data["attribution"]["rows"]}
    assert rows["batch_b2"]["pairs"]["n_total"] == 2 and rows["hitlen"]["hits"]["honoured"] == 2


def test_compare_reports_show_base_and_variant_side_by_side(pair: Comparison, tmp_path: Path) -> None:
    tables = build_tables(pair)
    assert [t.id for t in tables][-1] == "attribution"
    table = attribution_table(pair)
    row = cells(table, "batch_b2")
    assert (
        row["base equal outputs (text)"] is not None and cell_json(row["base equal outputs (text)"]) is None
    )
    assert row["variant equal outputs (text)"] == Frac(2, 2)
    head = cells(table, "batch")
    assert head["base equal outputs (text)"] == Text("not run") and head["variant token IDs equal"] == Frac(
        2, 2
    )
    assert table.reading.startswith("Base: ") and " Variant: " in table.reading
    md, summary, html = write_reports(pair, tmp_path / "out")
    assert "### 6. Attribution: what caused each difference" in md.read_text()
    data = json.loads(summary.read_text())["tables"]["attribution"]
    by_key = {r["key"]: r["cells"] for r in data["rows"]}
    assert by_key["hitlen_L_32"]["variant primed hits honoured"] == {"k": 0, "n": 2}
    page = html.read_text()
    assert '<h2 id="attribution">6. Attribution' in page and 'id="attribution-hitlen_L_32"' in page
    assert "Equal outputs, alone vs in a batch, by batch size" in page
    assert "Max |top-k logprob delta| by hit length" in page


def test_plots_only_for_what_a_run_measured(pair: Comparison) -> None:
    assert len(attribution_plots(pair)) == 4  # equality and delta, by batch size and by hit length
    only_base = replace(pair, variant=pair.base)
    assert attribution_plots(only_base) == []


def test_confounding_is_read_out(tmp_path: Path) -> None:
    at2 = ScenarioSettings(scenarios=("cache", "batch"), batch_sizes=(1, 2))
    quiet = make_run(
        tmp_path / "a", "quiet", at2, {"batch_effect": BatchEffect(window_s=None, jitter=0.0)}, concurrency=2
    )
    table = run_attribution_table(quiet.scores)
    assert table is not None
    assert (
        "confounded with batch composition: batch of 2: 2/2 equal, max |delta| 0, so batching shows no effect"
        in (table.reading)
    )
    assert cells(table, "cache_cold_warm")["confounded with"] == Text("batch composition")
    moved = make_run(
        tmp_path / "b",
        "moved",
        at2,
        {"batch_effect": BatchEffect(window_s=None, jitter=JITTER)},
        concurrency=2,
    )
    text = run_attribution_table(moved.scores).reading  # type: ignore[union-attr]
    assert re.search(
        r"batch of 2: 2/2 equal, max \|delta\| 4(\.0\d)?e-05: the cache figures cannot be attributed", text
    )
    other = ScenarioSettings(scenarios=("cache", "batch"), batch_sizes=(1, 3))
    elsewhere = make_run(tmp_path / "c", "elsewhere", other, {}, concurrency=2)
    text = run_attribution_table(elsewhere.scores).reading  # type: ignore[union-attr]
    assert "the batch scenario measured batch sizes 3, not 2" in text
    none = make_run(tmp_path / "d", "none", ScenarioSettings(), {}, concurrency=2)
    text = run_attribution_table(none.scores).reading  # type: ignore[union-attr]
    assert "the batch scenario was not run (lbeval run --scenarios cache,batch --batch-sizes 1,2" in text


# ---------------------------------------------------------------- gate


def statuses(c: Comparison, policy_text: str | None = None) -> dict[str, str]:
    policy = load_policy(None) if policy_text is None else parse_policy(policy_text, "p.toml")
    return {r.rule: r.status for r in evaluate(c, policy).results}


def test_hitlen_rule_is_skipped_without_hitlen_and_has_no_data_with_one_side(pair: Comparison) -> None:
    assert statuses(replace(pair, variant=pair.base))["hitlen_cache_honoured"] == SKIPPED
    verdict = evaluate(pair, load_policy(None))
    result = next(r for r in verdict.results if r.rule == "hitlen_cache_honoured")
    assert result.status == NO_DATA and "base run has no hitlen scenario" in result.measured
    assert verdict.exit_code == 2
    variant_only = "schema_version = 1\n[rules.hitlen_cache_honoured]\nruns = ['variant']\n"
    result = next(
        r
        for r in evaluate(pair, parse_policy(variant_only, "p.toml")).results
        if r.rule == "hitlen_cache_honoured"
    )
    assert result.status == FAIL and "variant honoured 2/4" in result.measured
    assert "qasper/ex0 L=32: 0 cached, 32 promised" in result.detail
    both = replace(pair, base=pair.variant)
    assert statuses(both)["hitlen_cache_honoured"] == FAIL


def test_batch_invariant_and_the_other_scenario_rules(pair: Comparison) -> None:
    on = (
        "schema_version = 1\n[rules.batch_invariant]\n[rules.hitlen_equality]\n[rules.repeats_single_output]\n"
        "[rules.traffic_invariant]\n"
    )
    got = statuses(pair, on)
    assert got["batch_invariant"] == FAIL  # tokens equal, but the logprobs moved: not bit-identical
    assert got["hitlen_equality"] == PASS
    assert got["repeats_single_output"] == NO_DATA and got["traffic_invariant"] == NO_DATA
    tokens_only = "schema_version = 1\n[rules.batch_invariant]\nbitwise = false\n"
    assert statuses(pair, tokens_only)["batch_invariant"] == PASS
    defaults = statuses(replace(pair, variant=pair.base))
    for rule in ("batch_invariant", "hitlen_equality", "repeats_single_output", "traffic_invariant"):
        assert defaults[rule] == SKIPPED  # off by default


def test_every_row_a_scenario_rule_points_at_is_a_row_of_the_report(pair: Comparison) -> None:
    both = replace(pair, base=pair.variant)
    on = "schema_version = 1\n[rules.hitlen_cache_honoured]\n[rules.batch_invariant]\n[rules.hitlen_equality]\n"
    verdict = evaluate(both, parse_policy(on, "p.toml"))
    rows = {(t.id, r.key) for t in build_tables(both) for r in t.rows}
    refs = [(ref.table, ref.row) for r in verdict.results for ref in r.rows]
    assert refs and set(refs) <= rows
    assert ("attribution", "hitlen") in refs and ("attribution", "batch_warm") in refs
