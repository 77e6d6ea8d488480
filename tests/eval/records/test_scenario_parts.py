"""A later stage's part of each scenario (ScenarioParts): one per registered scenario, a default for the others."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval.analyze.attribution import ROW_MODULES
from eval.records.scenario_kinds.parts import ScenarioParts, import_scenario_modules
from eval.records.scenario_kinds.registry import names
from eval.report.attribution import PLOT_MODULES


def test_a_registered_scenario_gets_its_part_and_the_others_the_default() -> None:
    parts: ScenarioParts[str] = ScenarioParts("widget", "default")
    first, second = names()[:2]
    assert parts.register(first, "its own") == "its own"
    assert parts.of(first) == "its own"
    assert parts.of(second) == "default"
    assert parts.of("not-a-scenario") == "default"
    assert parts.names() == (first,)


@pytest.mark.parametrize(
    ("name", "twice", "message"),
    [
        ("not-a-scenario", False, "widget 'not-a-scenario': no scenario of that name is registered"),
        (None, True, "has two widgets"),
    ],
)
def test_refusals(name: str | None, twice: bool, message: str) -> None:
    parts: ScenarioParts[str] = ScenarioParts("widget", "default")
    name = name or names()[0]
    if twice:
        parts.register(name, "one")
    with pytest.raises(ValueError, match=message):
        parts.register(name, "two")
    assert parts.of(name) == ("one" if twice else "default")


def test_unregister_takes_the_part_away_and_a_missing_one_is_a_key_error() -> None:
    parts: ScenarioParts[str] = ScenarioParts("widget", "default")
    name = names()[0]
    parts.register(name, "own")
    parts.unregister(name)
    assert parts.of(name) == "default" and parts.names() == ()
    with pytest.raises(KeyError):
        parts.unregister(name)


def test_a_stages_scenario_modules_are_those_of_registered_scenarios_in_the_registrys_order() -> None:
    """Independently of the loader: the row and plot modules on disk, named after a registered scenario."""
    root = Path(__file__).resolve().parents[3]
    for package, loaded in (
        ("eval.analyze.scenario_rows", ROW_MODULES),
        ("eval.report.scenario_plots", PLOT_MODULES),
    ):
        on_disk = {p.stem for p in (root / package.replace(".", "/")).glob("*.py")}
        expected = tuple(f"{package}.{n}" for n in names() if n in on_disk)
        assert loaded == expected == import_scenario_modules(package)
        assert len(expected) >= 2  # batch and hitlen have both
