"""`lbeval prepare`'s benchmark options come from the registered benchmarks: each benchmark's entry in
PREPARE_ARGS adds its options to the parser (in a fresh registry, apart from the process's) and makes its own
options object from their parsed values; a clash between two benchmarks, or with prepare's own options, is
refused in one line. The shipped `--v2-mode` keeps its name, choices and error line."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass

import pytest

from eval.benchmark_registry import REGISTRY, Benchmark, BenchmarkRegistry, CliOption, Hook
from eval.benchmarks.longbench_v2.spec import V2Options
from eval.cli import main
from eval.commands.prepare import benchmark_options, configure, prepare_dests
from eval.prepare.benchmark_part import PREPARE_ARGS, PrepareArgs


@dataclass(frozen=True)
class ToyOptions:
    level: str


def toy_options(values: Mapping[str, str]) -> ToyOptions:
    return ToyOptions(values["toy_level"])


LEVEL = CliOption("toy-level", "how hard the toy is (default %(default)s)", "easy", ("easy", "hard"))


def toy(name: str, *options: CliOption, make: bool | None = None) -> Benchmark:
    """A benchmark of one dataset (`<name>_qa`) that fills only PREPARE_ARGS."""
    args = PrepareArgs(
        f"{name}_qa ({name})", options, toy_options if (bool(options) if make is None else make) else None
    )
    return Benchmark(
        name,
        name,
        (),
        lambda d: d == f"{name}_qa",
        lambda: [f"{name}_qa"],
        lambda d: "",
        hooks=(Hook(PREPARE_ARGS, args),),
    )


def registry_of(*loaded: Benchmark) -> BenchmarkRegistry:
    fresh = BenchmarkRegistry()
    for benchmark in loaded:
        fresh.register(benchmark)
    return fresh


def parser_of(registry: BenchmarkRegistry) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="lbeval prepare")
    configure(p, registry)
    return p


def flags(p: argparse.ArgumentParser) -> set[str]:
    return {flag for action in p._actions for flag in action.option_strings}


PREPARE_OWN = flags(parser_of(registry_of(toy("none"))))  # prepare's options with a benchmark that adds none


@pytest.mark.parametrize(
    ("loaded", "argv", "added", "made"),
    [
        ((toy("toy", LEVEL),), [], {"--toy-level"}, {"toy": ToyOptions("easy")}),
        ((toy("toy", LEVEL),), ["--toy-level", "hard"], {"--toy-level"}, {"toy": ToyOptions("hard")}),
        (
            (toy("plain"), toy("toy", LEVEL)),
            ["--toy-level", "hard"],
            {"--toy-level"},
            {"toy": ToyOptions("hard")},
        ),
        ((toy("plain"),), [], set(), {}),
    ],
    ids=["default", "given", "beside-one-without-options", "none"],
)
def test_a_registered_benchmark_adds_its_options_and_makes_its_options_object(
    loaded: tuple[Benchmark, ...], argv: list[str], added: set[str], made: dict[str, object]
) -> None:
    registry = registry_of(*loaded)
    p = parser_of(registry)
    assert flags(p) - PREPARE_OWN == added
    args = p.parse_args([*argv, "--out", "x.jsonl"])
    assert benchmark_options(args, registry) == made
    datasets_help = next(a.help for a in p._actions if "--datasets" in a.option_strings)
    assert datasets_help == "comma-separated " + " and/or ".join(f"{b.name}_qa ({b.name})" for b in loaded)


@pytest.mark.parametrize(
    ("loaded", "line"),
    [
        (
            (toy("toy", LEVEL), toy("other", LEVEL)),
            "benchmark 'other': the prepare option --toy-level is benchmark 'toy''s",
        ),
        (
            (toy("toy", CliOption("seed", "a clash", "1")),),
            "benchmark 'toy': the prepare option --seed is lbeval prepare's",
        ),
        (
            (toy("toy", CliOption("data_dir", "a clash by dest", "x")),),
            "benchmark 'toy': the prepare option --data_dir is lbeval prepare's",
        ),
        (
            (toy("toy", LEVEL, make=False),),
            "benchmark 'toy' declares prepare options but no `make` to read them",
        ),
    ],
    ids=["two-benchmarks", "prepare-own", "prepare-own-dest", "no-make"],
)
def test_a_clash_of_options_is_refused_in_one_line(loaded: tuple[Benchmark, ...], line: str) -> None:
    with pytest.raises(ValueError) as caught:
        parser_of(registry_of(*loaded))
    assert str(caught.value) == line


def test_the_shipped_options_are_the_registered_benchmarks_and_v2_mode_reaches_its_options() -> None:
    p = parser_of(REGISTRY)
    declared = {o.flag for entry in REGISTRY.entries(PREPARE_ARGS).values() for o in entry.options}
    assert flags(p) - PREPARE_OWN == declared == {"--v2-mode"}
    args = p.parse_args(["--v2-mode", "cot", "--out", "x.jsonl"])
    assert benchmark_options(args) == {"longbench_v2": V2Options(mode="cot")}
    assert benchmark_options(p.parse_args(["--out", "x.jsonl"])) == {"longbench_v2": V2Options(mode="0shot")}


def test_an_unknown_v2_mode_exits_64_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["prepare", "--v2-mode", "bogus", "--out", "x.jsonl"])
    assert caught.value.code == 64
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == (
        "lbeval prepare: error: argument --v2-mode: invalid choice: 'bogus' (choose from '0shot', 'cot', 'nocontext')"
    )
    assert [line for line in err if "error" in line] == [err[-1]]


def test_prepare_s_own_dests_are_every_option_its_parser_has() -> None:
    """The dests no benchmark may take (prepare_dests, from prepare's declarations) are every option of prepare's
    parser with a benchmark that adds none, -h/--help's among them."""
    dests = {action.dest for action in parser_of(registry_of(toy("none")))._actions}
    assert prepare_dests() == dests
    assert {"help", "data_dir", "datasets", "specs", "out"} <= dests
