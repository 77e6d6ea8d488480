"""A launch spec's `scenarios` table: validated by the spec loader, used by `lbeval run` unless its options say
otherwise; the chunked-prefill budget of a spec's server arguments becomes the hitlen scenario's."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from eval.commands import run as run_command
from eval.errors import ConfigError
from eval.serve.launch_specs import load_launch_specs

SPECS = """
[variants.fast]
url = "http://127.0.0.1:9/v1"
scenarios = { names = ["cache", "batch", "hitlen"], batch_sizes = [1, 2], hit_lengths = [7, 8], inputs = 3 }

[variants.chunky]
python = "/bin/true"
extra_args = ["--max-num-batched-tokens", "256"]
scenarios = { names = ["hitlen"], max_tokens = 4 }
"""


def args_for(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    run_command.configure(p)
    return p.parse_args(["--variant", "v", "--inputs", "i.jsonl", *argv])


def test_spec_scenarios_are_the_defaults_of_lbeval_run(tmp_path: Path) -> None:
    path = tmp_path / "specs.toml"
    path.write_text(SPECS)
    specs = load_launch_specs([path], environ={})
    assert specs["fast"].scenarios["batch_sizes"] == [1, 2]
    s = run_command.run_config(args_for([]), "v", (), specs["fast"]).scenarios
    assert s.scenarios == ("cache", "batch", "hitlen") and s.batch_sizes == (1, 2) and s.hit_lengths == (7, 8)
    assert s.inputs == 3 and s.max_tokens is None
    args = args_for(["--scenarios", "cache", "--batch-sizes", "1,8"])
    s = run_command.run_config(args, "v", (), specs["fast"]).scenarios
    assert s.scenarios == ("cache",) and s.batch_sizes == (1, 8)  # the command line wins
    chunky = run_command.run_config(args_for([]), "v", (), specs["chunky"])
    s = chunky.scenarios
    assert (
        s.scenarios == ("hitlen",) and s.max_tokens == 4 and s.hit_budget == 256
    )  # --max-num-batched-tokens
    assert chunky.topology.spec is specs["chunky"] and specs["fast"].url is not None
    assert run_command.run_config(args_for([]), "v", (), specs["fast"]).base_url == specs["fast"].url
    plain = run_command.run_config(args_for([]), "v", ["http://127.0.0.1:9/v1"], None)
    # no table, no option: the default plan
    assert (
        plain.scenarios.scenarios == ("cache", "batch", "hitlen", "repeats", "traffic", "replicas")
        and plain.topology.spec is None
    )
    assert plain.scenarios.default_plan
    cache_only = run_command.run_config(
        args_for(["--scenarios", "cache"]), "v", ["http://127.0.0.1:9/v1"], None
    )
    assert cache_only.scenarios.scenarios == ("cache",)
    # lbeval ab: no spec table (both sides' plans must match): the default plan, no chunked-prefill budget
    s = run_command.run_config(args_for([]), "v", (), specs["chunky"], spec_scenarios=False).scenarios
    assert s.default_plan and s.hit_budget is None


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('scenarios = { nmes = ["cache"] }', "scenarios.nmes: unknown key"),
        ('scenarios = { names = "cache" }', "scenarios.names: expected a list of str"),
        ("scenarios = { repeats = true }", "scenarios.repeats: expected int"),
        ('scenarios = "batch"', "expected a table"),
    ],
)
def test_bad_spec_scenarios_are_refused(tmp_path: Path, table: str, message: str) -> None:
    path = tmp_path / "specs.toml"
    path.write_text(f'[variants.x]\nurl = "http://127.0.0.1:9/v1"\n{table}\n')
    with pytest.raises(ConfigError, match=message):
        load_launch_specs([path], environ={})
