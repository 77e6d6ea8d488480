"""docs/guide-new-rule.md shows a rule lbeval does not ship, `retried_requests`, as the whole diff that would add it:
its module, its test and its table in the shipped policy. Here the diff is read from the page and applied (git
apply) to a copy of the shipped policy in a temporary folder; the checkout is untouched. With nothing else edited:

- the diff touches those three files only, and only adds lines;
- the module registers its rule; dropped beside the shipped rules, the registry finds it (a subprocess extends the
  ruleset package's search path) and `lbeval gate` with the patched policy exits 0 on clean runs, 1 on retried ones;
- the policy check accepts its table and refuses a bad parameter with one line;
- the gate judges it PASS on two clean runs and FAIL when one input's requests were retried, and JUnit, the summary
  and summary.json list it;
- the diff's own test passes.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from eval.analyze.compare import Comparison, compare
from eval.analyze.score import score_run
from eval.errors import ConfigError
from eval.gate.junit import junit_xml
from eval.gate.policy import load_policy, parse_policy
from eval.gate.registry import RULESET, listing, rule
from eval.gate.rule import FAIL, PASS, unregister
from eval.gate.rules import evaluate
from eval.gate.verdict import EXIT_FAIL, EXIT_PASS
from eval.report.json_out import verdict_json
from tests.eval.gate.test_gate import unwrap
from tests.eval.runfactory import base_and_variant, write_run

ROOT = Path(__file__).resolve().parents[3]
NAME = "retried_requests"
MODULE = f"eval/gate/ruleset/{NAME}.py"
TEST = f"tests/eval/gate/test_rule_{NAME}.py"
POLICY = "eval/gate/policy_default.toml"


def guide_diff() -> str:
    guide = (ROOT / "docs" / "guide-new-rule.md").read_text(encoding="utf-8")
    return guide.split("```diff\n", 1)[1].split("\n```", 1)[0] + "\n"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A folder holding a copy of the shipped policy with the guide's diff applied (the module and test added)."""
    root = tmp_path / "tree"
    (root / POLICY).parent.mkdir(parents=True)
    (root / POLICY).write_bytes((ROOT / POLICY).read_bytes())
    # git apply as a plain patch: no repository above the folder
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(tmp_path)}
    subprocess.run(["git", "apply", "-"], input=guide_diff(), cwd=root, env=env, text=True, check=True)
    return root


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def new_rule(tree: Path) -> Iterator[ModuleType]:
    """The diff's module, imported as the registry would import it; taken away again afterwards."""
    assert rule(NAME) is None  # not shipped
    module = _load(f"{RULESET}.{NAME}", tree / MODULE)
    yield module
    unregister(NAME)
    del sys.modules[f"{RULESET}.{NAME}"]


@pytest.fixture
def own_test(tree: Path) -> Iterator[ModuleType]:
    """The diff's test module, imported from the folder."""
    yield _load("guide_rule_test", tree / TEST)
    del sys.modules["guide_rule_test"]


def retried_comparison(tmp_path: Path, test_module: ModuleType | None) -> Comparison:
    """Two clean runs (the test fixtures' builder); with the diff's test module, its `retried` marks every record
    of the variant's qas01 as answered after two transport retries."""
    base, variant = base_and_variant(tmp_path)
    runs = tmp_path / "runs"
    variant_dir = write_run(runs, variant)
    if test_module is not None:
        test_module.retried(variant_dir, "qas01")
    return compare(score_run(write_run(runs, base)), score_run(variant_dir))


def test_the_diff_adds_a_module_its_test_and_its_policy_table_and_nothing_else(tree: Path) -> None:
    diff = guide_diff()
    assert re.findall(r"^\+\+\+ b/(\S+)$", diff, re.M) == [MODULE, TEST, POLICY]
    assert re.findall(r"^diff --git a/(\S+) ", diff, re.M) == [MODULE, TEST, POLICY]
    assert diff.count("new file mode") == 2 and not re.search(r"^-(?!--)", diff, re.M)  # adds lines only
    assert not (ROOT / MODULE).exists() and not (ROOT / TEST).exists()  # not shipped
    assert f"[rules.{NAME}]" not in (ROOT / POLICY).read_text(encoding="utf-8")
    assert f"[rules.{NAME}]" in (tree / POLICY).read_text(encoding="utf-8")


def test_the_rule_registers_and_the_policy_checks_its_table(tree: Path, new_rule: ModuleType) -> None:
    assert rule(NAME) is new_rule.RULE
    assert any(line.startswith(NAME) and line.endswith(f"({RULESET}.{NAME})") for line in listing())
    policy = load_policy(tree / POLICY)
    assert policy.rules[NAME] == {"enabled": True, "max_fraction": 0.01, "runs": ["base", "variant"]}
    bad = f"schema_version = 1\n[rules.{NAME}]\nmax_fraction = 1.5\n"
    with pytest.raises(ConfigError) as refused:
        parse_policy(bad, "p.toml")
    assert str(refused.value) == f"p.toml: rules.{NAME}.max_fraction: must be a fraction in [0, 1], got 1.5"
    unregister(NAME)  # without the module its table is an unknown rule
    with pytest.raises(ConfigError, match=f"rules.{NAME}: unknown rule"):
        load_policy(tree / POLICY)
    _load(f"{RULESET}.{NAME}", tree / MODULE)


def test_the_gate_judges_it_and_junit_and_the_summaries_list_it(
    tree: Path, new_rule: ModuleType, own_test: ModuleType, tmp_path: Path
) -> None:
    policy = load_policy(tree / POLICY)
    for folder, test_module, status, measured in (
        ("clean", None, PASS, "retried requests: base 0/54, variant 0/54"),
        ("retried", own_test, FAIL, "retried requests: base 0/54, variant 9/54"),  # 9 records per input
    ):
        verdict = evaluate(retried_comparison(tmp_path / folder, test_module), policy)
        result = next(r for r in verdict.results if r.rule == NAME)
        assert (result.status, result.measured, result.threshold) == (
            status, measured, "<= 0.01 of the final records per run"
        )  # fmt: skip
        assert verdict.exit_code == (EXIT_PASS if status == PASS else EXIT_FAIL), verdict.summary
        suite = ET.fromstring(junit_xml(verdict, "s")).find("testsuite")
        assert suite is not None
        case = next(c for c in suite.findall("testcase") if c.get("name") == NAME)
        failure = case.find("failure")
        assert (failure is not None) == (status == FAIL)
        assert failure is None or measured in (failure.get("message") or "")
        summary = verdict_json(verdict)
        assert summary is not None
        listed = [r for r in summary["results"] if r["rule"] == NAME]
        assert [(r["status"], r["measured"]) for r in listed] == [(status, measured)]
    checked = sum(r.status in (PASS, FAIL) for r in verdict.results)
    assert verdict.summary == f"gate: FAIL (exit 1): 1 of {checked} rules failed: {NAME}"


def test_the_diffs_own_test_passes(new_rule: ModuleType, own_test: ModuleType, tmp_path: Path) -> None:
    tests = [getattr(own_test, n) for n in dir(own_test) if n.startswith("test_")]
    assert len(tests) == 1
    for test in tests:
        test(tmp_path)


GATE = """
import sys
from pathlib import Path

import eval.gate.ruleset as ruleset

tree = Path(sys.argv[1])
ruleset.__path__.append(str(tree / "eval/gate/ruleset"))

from eval.cli import main

for variant in ("clean", "retried"):
    code = main(["gate", "main", variant, "--runs", str(tree / "runs"), "--policy", str(tree / sys.argv[2])])
    print("EXIT", variant, code)
"""


def test_dropped_beside_the_shipped_rules_the_registry_finds_it_and_lbeval_gate_exits_on_it(
    tree: Path, own_test: ModuleType, tmp_path: Path
) -> None:
    """Nothing names the module: the registry imports what is in the ruleset folder (here, its search path
    extended in a subprocess); the verdict turns on it: exit 0 on clean runs, 1 with one input's retries."""
    base, variant = base_and_variant(tmp_path)
    runs = tree / "runs"
    write_run(runs, base)
    variant.variant = "clean"
    write_run(runs, variant)
    variant.variant = "retried"
    own_test.retried(write_run(runs, variant), "qas01")
    proc = subprocess.run(
        [sys.executable, "-c", GATE, str(tree), POLICY], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    exits = [line.split()[1:] for line in proc.stdout.splitlines() if line.startswith("EXIT ")]
    assert exits == [["clean", "0"], ["retried", "1"]], proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"FAIL     {NAME}: measured retried requests: base 0/54, variant 9/54" in unwrap(proc.stdout)
    assert rule(NAME) is None  # this interpreter's registry is untouched
