"""bench.plan_cost on a default-plan run of the fake server: the hitlen unit split by hit class, and the plan
projected with and without some classes. Figures are not judged (they mean nothing on the fake); their sums are."""

from __future__ import annotations

import argparse
import re

import pytest

from bench import plan_cost
from eval.commands import run as run_command
from eval.records.run_folder import load_run
from eval.records.types import RequestRecord
from eval.run.runner import execute_run
from tests.eval.fake_fixtures import config_for, make_row, write_rows
from tests.support.fake_server import FakeServer

DEPTHS = frozenset({"middle", "deepest partial"})


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> list[RequestRecord]:
    tmp = tmp_path_factory.mktemp("plan-cost")
    p = argparse.ArgumentParser()
    run_command.configure(p)
    plan = run_command.scenario_config(p.parse_args(["--variant", "v", "--inputs", "i"]), {})
    inputs = write_rows(tmp / "inputs.jsonl", [make_row(i) for i in range(4)])
    with FakeServer(block_size=16) as server:
        run_dir = execute_run(config_for(server, inputs, tmp / "runs", scenarios=plan))
    return list(load_run(run_dir).records)


def test_the_hitlen_unit_splits_into_its_classes(records: list[RequestRecord]) -> None:
    classes = plan_cost.by_hit_class(records)
    assert set(classes) == {"cold", "1B", "middle", "deepest partial", "last block"}
    # one request at a time in a hitlen unit: the classes' seconds add up to the unit's
    assert sum(classes.values()) == pytest.approx(plan_cost.costs(records)["hitlen"].seconds, rel=1e-9)


def test_the_projection_leaves_out_only_the_classes_named(records: list[RequestRecord]) -> None:
    same = plan_cost.project(records, 5, frozenset(), 12, 1)
    assert same is not None and same.without == same.scenarios
    p = plan_cost.project(records, 5, DEPTHS, 32, 2)
    assert p is not None
    dropped = sum(s for name, s in plan_cost.by_hit_class(records).items() if name in DEPTHS)
    assert p.scenarios - p.without == pytest.approx(2 * dropped, rel=1e-9)  # one scenario input in this run
    table = plan_cost.costs(records)
    main, timing = table["cache main"], table["cache timing"]
    per_input = main.seconds / main.units + 5 * timing.seconds / timing.units
    assert p.cache_only == pytest.approx(32 * per_input, rel=1e-9)


def test_the_command_prints_both_projections(
    records: list[RequestRecord], capsys: pytest.CaptureFixture[str]
) -> None:
    plan_cost.print_projections(records, 5, DEPTHS)
    out = capsys.readouterr().out.splitlines()
    n = r"[0-9]+"
    pct = r"\+[0-9]+\.[0-9]%"
    for line, (inputs, scen) in zip(out, ((12, 1), (32, 2)), strict=True):
        assert re.fullmatch(
            rf"  projected, {inputs} inputs \({scen} scenario\): cache-only {n} s; default plan \+{n} s \({pct}\); "
            rf"without deepest partial, middle: \+{n} s \({pct}\); with vs without: {pct}",
            line,
        ), line
