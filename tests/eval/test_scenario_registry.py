"""The scenario registry: a scenario is one registered object (eval/records/scenario_kinds/<name>.py, its planner
in eval/run/scenarios/<name>.py), and the stages list the scenarios from the registry.

- a name, a pass or a row key is registered once; a planner or a row builder only for a registered scenario, once
- a toy scenario registered here shows in the `--scenarios` choices, the plan, the attribution rows and the
  attribution table, with no other module edited
- the guide's small scenario (docs/scenarios.md), its two modules dropped beside the others (a subprocess extends
  the packages' search path), is found, stays out of the default plan, runs, and shows in the scores
- every scenario name a stage compares a scenario or unit kind with is a registered one, and every name a stage
  keys by scenario (row builders, planners, the gate's rules a scenario brings) is registered
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from eval.analyze.attribution import ROW_MODULES, attribution
from eval.analyze.attribution_rows import built_names, generic_rows, register_rows
from eval.records.final import select_final
from eval.records.manifest_parts import RunSettings
from eval.records.scenario_kinds.registry import (
    PairDef,
    ScenarioSpec,
    names,
    register,
    registered,
    unregister,
)
from eval.records.scenarios import SCENARIOS, parse_scenarios
from eval.records.types import RequestRecord
from eval.records.vocabulary import CACHE_SCENARIO, SCENARIO_NAMES, UNIT_MAIN, UNIT_TIMING
from eval.report.attribution import one_run_table, reading
from eval.run.scenarios.base import ScenarioStep, scenario_step, steps_of
from eval.run.scenarios.plan import plan_scenario_units
from eval.run.scenarios.planners import (
    PlanContext,
    Planner,
    planned_names,
    register_planner,
    unregister_planner,
)
from eval.run.scenarios.settings import ScenarioSettings
from tests.eval.fake_fixtures import make_row
from tests.eval.records.test_run_folder import make_record

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
TOY = ScenarioSpec(
    name="toy",
    order=99,
    isolates="nothing in particular",
    passes=("toy_ref", "toy_measured"),
    units="one unit per input: the reference, then the measured request",
    cost="2",
    pairs=(PairDef("toy", "toy cause", "toy_ref", "toy_measured", None, "the prompt", "the toy knob"),),
    rules=(),
)


def plan_toy(ctx: PlanContext) -> list[ScenarioStep]:
    return [
        scenario_step("toy_ref", 0, "miss", {"input_index": ctx.index}, max_tokens=ctx.settings.max_tokens),
        scenario_step("toy_measured", 0, "miss", {}, max_tokens=ctx.settings.max_tokens),
    ]


@pytest.fixture
def toy() -> Iterator[ScenarioSpec]:
    register(TOY)
    register_planner(Planner("toy", plan_toy))
    try:
        yield TOY
    finally:
        unregister_planner("toy")
        unregister("toy")


def test_a_name_a_pass_or_a_row_is_registered_once() -> None:
    batch = SCENARIOS["batch"]
    with pytest.raises(ValueError, match="'batch' is registered twice"):
        register(batch)
    with pytest.raises(ValueError, match="pass 'batch_alone' belongs to scenario 'batch'"):
        register(replace(batch, name="batch2", pairs=()))
    with pytest.raises(ValueError, match="row 'batch' belongs to scenario 'batch'"):
        register(replace(batch, name="batch2", passes=("other",)))
    assert "batch2" not in SCENARIOS
    with pytest.raises(ValueError, match="'traffic' has two planners"):
        register_planner(Planner("traffic", plan_toy))
    with pytest.raises(ValueError, match="no scenario of that name"):
        register_planner(Planner("toy", plan_toy))
    with pytest.raises(ValueError, match="'hitlen' has two row builders"):
        register_rows("hitlen", generic_rows)
    with pytest.raises(ValueError, match="no scenario of that name"):
        register_rows("toy", generic_rows)


def toy_records() -> list[RequestRecord]:
    """Two inputs: e1's measured output equals its reference, e2's leaves it at token 1."""
    recs = []
    for seq, (example, pass_name, tokens) in enumerate(
        (
            ("e1", "toy_ref", [5, 7, 2, 9]),
            ("e1", "toy_measured", [5, 7, 2, 9]),
            ("e2", "toy_ref", [5, 7, 2, 9]),
            ("e2", "toy_measured", [5, 8, 2, 9]),
        )
    ):
        recs.append(
            make_record(
                example_id=example, pass_name=pass_name, scenario="toy", seq=seq, output_token_ids=tokens,
                output_text=" ".join(map(str, tokens)),
            )
        )  # fmt: skip
    return recs


def test_a_registered_toy_scenario_shows_in_every_listing(toy: ScenarioSpec) -> None:
    assert parse_scenarios("toy,cache") == ("cache", "toy")
    assert list(SCENARIOS)[-1] == "toy" and planned_names()[-1] == "toy"
    # the plan: one toy unit per input, its planner's steps
    rows = [make_row(i, words=40) for i in range(2)]
    units = plan_scenario_units(
        ScenarioSettings(scenarios=("cache", "toy"), max_tokens=4), rows,
        token_ids={}, cache_model=None, max_tokens_override=None,
    )  # fmt: skip
    assert [(u.kind, u.row_index) for u in units] == [("toy", 0), ("toy", 1)]
    assert [s.pass_name for s in units[1].steps] == ["toy_ref", "toy_measured"]
    assert steps_of(units[1])[0].variation == (("input_index", 1),)
    # the attribution: its row from its pair (1 of the 2 pairs token-equal), or "not run"
    keys = [("qasper", "e1"), ("qasper", "e2")]
    sel = select_final(toy_records())
    att = attribution(keys, sel, RunSettings(scenarios=["cache", "toy"]), {})
    row = att.row("toy")
    assert row is not None and row.measured and row.scenario == "toy" and row.cause == "toy cause"
    assert row.pairs is not None and (row.pairs.n_total, row.pairs.tokens_equal) == (2, 1)
    assert [d.position for d in row.pairs.divergences] == [1]
    not_run = attribution(keys, sel, RunSettings(scenarios=["cache"]), {}).row("toy")
    assert not_run is not None and not not_run.measured
    # the report: its row in the table, its finding in the reading
    table = one_run_table(att)
    assert "toy" in [r.key for r in table.rows]
    assert "toy cause (toy_measured vs toy_ref) 1/2 equal" in reading(att)
    assert "Points at: differences in one cause only: toy 1/2." in reading(att)
    assert "Not run: cache, batch, hitlen, repeats, traffic, replicas." in reading(att)  # no cache agreement


CHECK = """
import sys
from dataclasses import replace
from pathlib import Path

import eval.records.scenario_kinds as kinds
import eval.run.scenarios as runners

tmp = Path(sys.argv[1])
kinds.__path__.append(str(tmp / "records"))
runners.__path__.append(str(tmp / "run"))

from eval.analyze.score import score_run
from eval.benchmarks.plugins import load_benchmarks
from eval.records import vocabulary as v
from eval.records.scenarios import DEFAULT_PLAN
from eval.report.attribution import run_attribution_table
from eval.run.runner import execute_run
from eval.run.scenarios import plan
from eval.run.scenarios.settings import ScenarioSettings
from tests.eval.fake_fixtures import config_for, make_row, write_rows
from tests.support.fake_server import FakeServer

load_benchmarks()  # as tests/conftest.py does for the stages called directly
assert v.SCENARIO_NAMES[-1] == "salt" and v.SCENARIO_PASSES["salt"] == ("salt_a", "salt_b")
assert v.scenario_of("salt_b") == "salt" and v.choice_of("salt_a") == "salt"
assert "eval.run.scenarios.salt" in plan.RUNNERS
assert "salt" not in DEFAULT_PLAN.scenarios and DEFAULT_PLAN.scenarios[-1] == "replicas"
inputs = write_rows(tmp / "inputs.jsonl", [make_row(i, words=w) for i, w in enumerate((40, 47))])
with FakeServer() as fake:
    config = config_for(fake, inputs, tmp / "runs", passes=("cold", "warm", "repeat"))
    run_dir = execute_run(replace(config, scenarios=ScenarioSettings(scenarios=("cache", "salt"), max_tokens=4)))
scores = score_run(run_dir).scores
row = scores.attribution.row("salt")
table = run_attribution_table(scores)
print(scores.run.complete, row.measured, row.pairs.n_total, row.pairs.tokens_equal, "salt" in [r.key for r in table.rows])
"""


def doc_modules() -> dict[str, str]:
    """The example scenario's modules in docs/scenarios.md: each python block whose first line names its path."""
    text = (ROOT / "docs" / "scenarios.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n# (\S+)\n(.*?)```", text, re.S)
    return {path: body for path, body in blocks}


def test_the_documented_scenario_runs_from_its_two_modules_alone(tmp_path: Path) -> None:
    """The guide's small scenario, dropped beside the others (a subprocess extends the two packages' search path),
    is in the pass vocabulary and the planners, stays out of the default plan, runs on the fake server, and its
    row is in the scores and the attribution table: 2 inputs, 1 pair each, equal (the fake's output depends on
    the prompt alone, never on the salt)."""
    modules = doc_modules()
    assert sorted(modules) == ["eval/records/scenario_kinds/salt.py", "eval/run/scenarios/salt.py"]
    for path, body in modules.items():
        folder = tmp_path / ("records" if "/records/" in path else "run")
        folder.mkdir()
        (folder / "salt.py").write_text(body, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-c", CHECK, str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.stdout.split() == ["True", "True", "2", "2", "True"], proc.stderr[-3000:]
    assert "salt" not in SCENARIOS  # this interpreter's registry is untouched


def test_the_registry_holds_the_scenarios_in_their_order() -> None:
    assert names() == SCENARIO_NAMES == ("cache", "batch", "hitlen", "repeats", "traffic", "replicas")
    for spec in registered():  # every pair compares passes of its own scenario
        for p in spec.pairs:
            assert {p.a, p.b} <= set(spec.passes), (spec.name, p.key)


def test_every_scenario_keyed_table_names_registered_scenarios() -> None:
    assert set(built_names()) <= set(names())
    assert set(ROW_MODULES) == {f"eval.analyze.scenario_rows.{n}" for n in built_names()}  # one module each
    assert set(planned_names()) == set(names()) - {CACHE_SCENARIO}  # every scenario beyond cache is planned
    policy = tomllib.loads((ROOT / "eval/gate/policy_default.toml").read_text(encoding="utf-8"))
    for spec in registered():  # the rules a scenario brings are rules of the shipped policy
        assert set(spec.rules) <= set(policy["rules"]), spec.name


SCENARIO_ATTRS = {"scenario", "kind", "scenarios", "extra"}
UNIT_KINDS = {UNIT_MAIN, UNIT_TIMING}


def scenario_literals(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """String constants compared with a scenario or unit kind: `x.scenario == "batch"`, `unit.kind in ("a",)`,
    `"hitlen" in s.scenarios`, `"replicas" in s.extra`."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        if not any(isinstance(s, ast.Attribute) and s.attr in SCENARIO_ATTRS for s in sides):
            continue
        for side in sides:
            for c in ast.walk(side):
                if isinstance(c, ast.Constant) and isinstance(c.value, str):
                    yield node.lineno, c.value


def test_every_scenario_name_a_stage_compares_with_is_registered() -> None:
    wrong = []
    for stage in ("records", "run", "analyze", "gate", "report"):
        for path in sorted((ROOT / "eval" / stage).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for line, value in scenario_literals(tree):
                if value not in SCENARIOS and value not in UNIT_KINDS and value.isidentifier():
                    wrong.append(f"{path.relative_to(ROOT)}:{line}: {value!r}")
    assert not wrong, "\n".join(wrong)
    # and the check can fail
    found = list(scenario_literals(ast.parse('if r.scenario == "bacth": pass\nif "hitlen" in s.extra: pass')))
    assert found == [(1, "bacth"), (2, "hitlen")]
