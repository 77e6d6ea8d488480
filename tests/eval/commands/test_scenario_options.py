"""The scenario options are defined once (eval/commands/run.add_scenario_arguments) for `lbeval run` and
`lbeval ab`, and SCENARIO_OPTIONS, which lbeval ab copies to both sides, names exactly what they define."""

from __future__ import annotations

import argparse

from eval.commands import ab, run


def _scenario_dests(configure: object) -> set[str]:
    p = argparse.ArgumentParser()
    configure(p)  # type: ignore[operator]
    groups = [g for g in p._action_groups if (g.title or "").startswith("scenarios")]
    assert len(groups) == 1
    return {a.dest for a in groups[0]._group_actions}


def test_run_and_ab_define_the_same_scenario_options_and_ab_copies_every_one() -> None:
    assert _scenario_dests(run.configure) == _scenario_dests(ab.configure) == set(run.SCENARIO_OPTIONS)
