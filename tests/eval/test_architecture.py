"""The house rules of eval/ (docs/architecture.md), checked on the source so a broken boundary fails a test.

- Every module imports alone in a fresh interpreter (a hidden import circle fails here).
- Imports point down the pipeline: a stage imports only earlier stages and the base modules.
- No stage imports a benchmark package: a stage reads the registry (eval/benchmark_registry.py, below every
  stage); a benchmark package (eval/benchmarks/<name>/) sits at the top with the command layer, like a plugin,
  and imports no other benchmark and no command.
- No function-local import of an eval module outside the command layer (where it only defers heavy imports).
- scorers/ imports nothing from eval/; only run/ and serve/ (and prepare's server tokenizer) speak HTTP.
- A module takes from another stage package only the names in its `__all__`; so does every bench/ module
  (tests/ are exempt: a unit test tests its module's internals).
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BASE = (
    "eval",
    "eval.errors",
    "eval.atomic",
    "eval.provenance",
    "eval.redact",
    "eval.terminal",
    "eval.public",
    "eval.benchmark_registry",
)
STAGES = ("prepare", "serve", "records", "run", "analyze", "gate", "report")
# the benchmark protocol and registry (eval/benchmark_registry.py) is a base module below every stage; all of
# eval/benchmarks/ (each benchmark's package, the loader plugins.py) sits at the top with the command layer
# (docs/architecture.md)
HTTP_MODULES = {"httpx", "httpx2", "openai", "urllib.request", "requests"}
HTTP_ALLOWED = ("eval.run.", "eval.serve.", "eval.prepare.tokenizers")


def modules(package: str) -> list[str]:
    root = ROOT / package
    out = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] != "__main__":  # a __main__ module runs when imported; its package is imported instead
            out.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


def imported(tree: ast.AST, module: str) -> list[tuple[str, ast.AST]]:
    found: list[tuple[str, ast.AST]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, node) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, node))
    return found


def source_tree(module: str) -> ast.AST:
    rel = Path(*module.split("."))
    path = ROOT / (str(rel) + ".py") if (ROOT / (str(rel) + ".py")).exists() else ROOT / rel / "__init__.py"
    return ast.parse(path.read_text(encoding="utf-8"))


def stage_of(module: str) -> int | None:
    """Index in STAGES; -1 for base modules; None for the top (commands, cli, demo, the benchmark packages)."""
    if module in BASE:
        return -1
    parts = module.split(".")
    if parts[:2] == ["eval", "benchmarks"]:
        return None
    if len(parts) >= 2 and parts[1] in STAGES:
        return STAGES.index(parts[1])
    return None


EVAL_MODULES = modules("eval")


@pytest.mark.parametrize("module", EVAL_MODULES + modules("scorers"))
def test_every_module_imports_alone_in_a_fresh_interpreter(module: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", f"import {module}"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_imports_point_down_the_pipeline() -> None:
    wrong = []
    for module in EVAL_MODULES:
        here = stage_of(module)
        if here is None:
            continue
        for name, node in imported(source_tree(module), module):
            if not name.startswith("eval.") and name != "eval":
                continue
            there = stage_of(name)
            if there is None or there > here:
                wrong.append(f"{module}:{getattr(node, 'lineno', '?')} imports {name}")
    assert wrong == []


def benchmark_package(module: str) -> str | None:
    """`eval.benchmarks.longbench_v2.build` -> `longbench_v2`; None outside a benchmark package."""
    parts = module.split(".")
    inside = parts[:2] == ["eval", "benchmarks"] and (
        len(parts) >= 4 or len(parts) == 3 and (ROOT / Path(*parts)).is_dir()
    )
    return parts[2] if inside else None


def benchmark_import_problems(module: str, names: list[str]) -> list[str]:
    """What a benchmark package's module must not import: another benchmark package, or the command layer
    (commands, cli, demo, the loader): a package imports the stages and the registry, like a plugin."""
    own = benchmark_package(module)
    problems = []
    for name in names:
        if not name.startswith("eval.") or name in BASE:
            continue
        other = benchmark_package(name)
        if other is not None and other != own:
            problems.append(f"{module} imports another benchmark: {name}")
        elif other is None and stage_of(name) is None:
            problems.append(f"{module} imports the command layer: {name}")
    return problems


def stage_imports_of_benchmarks(module: str, names: list[str]) -> list[str]:
    """A stage module's imports of a benchmark package (or the loader): each is an import back up the pipeline."""
    if stage_of(module) is None:
        return []
    return [
        f"{module} imports a benchmark package: {n}"
        for n in names
        if n == "eval.benchmarks" or n.startswith("eval.benchmarks.")
    ]


def test_a_benchmark_package_is_self_contained() -> None:
    packages = {benchmark_package(m) for m in EVAL_MODULES} - {None}
    assert {"longbench", "longbench_v2"} <= packages
    wrong = []
    for module in EVAL_MODULES:
        if benchmark_package(module) is not None:
            wrong += benchmark_import_problems(module, [n for n, _ in imported(source_tree(module), module)])
    assert wrong == []
    # and the check can fail: v2 importing v1, v2's report importing a command; any stage and the registry pass
    build, report = "eval.benchmarks.longbench_v2.build", "eval.benchmarks.longbench_v2.report"
    assert benchmark_import_problems(build, ["eval.benchmarks.longbench.spec"]) != []
    assert benchmark_import_problems(report, ["eval.commands.compare", "eval.report.cells"]) == [
        f"{report} imports the command layer: eval.commands.compare"
    ]
    stages = ["eval.prepare.inputs", "eval.analyze.score", "eval.report.cells", "eval.benchmark_registry"]
    assert benchmark_import_problems(build, stages) == []


def test_no_stage_imports_a_benchmark_package() -> None:
    """Stages read the benchmark registry; the benchmark packages register themselves from the top."""
    wrong = []
    for module in EVAL_MODULES:
        wrong += stage_imports_of_benchmarks(module, [n for n, _ in imported(source_tree(module), module)])
    assert wrong == []
    # and the check can fail: analyze importing a v2 module, prepare importing the loader; the registry passes
    names = ["eval.benchmarks.longbench_v2.figures", "eval.benchmarks.plugins", "eval.benchmark_registry"]
    assert stage_imports_of_benchmarks("eval.analyze.accuracy", names) == [
        "eval.analyze.accuracy imports a benchmark package: eval.benchmarks.longbench_v2.figures",
        "eval.analyze.accuracy imports a benchmark package: eval.benchmarks.plugins",
    ]
    assert stage_imports_of_benchmarks("eval.commands.prepare", names) == []


def test_base_modules_import_no_stage() -> None:
    for module in BASE:
        if module not in EVAL_MODULES:
            continue
        names = [n for n, _ in imported(source_tree(module), module) if n.startswith("eval.")]
        assert all(n in BASE for n in names), (module, names)


def test_no_function_local_import_of_eval_outside_the_command_layer() -> None:
    found = []
    for module in EVAL_MODULES:
        if stage_of(module) is None and benchmark_package(module) is None:
            continue  # commands, cli, demo may defer heavy imports until a subcommand runs
        tree = source_tree(module)
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for name, node in imported(fn, module):
                if name.startswith("eval"):
                    found.append(f"{module}:{getattr(node, 'lineno', '?')} {name}")
    assert found == []


def test_scorers_import_nothing_from_eval() -> None:
    for module in modules("scorers"):
        names = [n for n, _ in imported(source_tree(module), module)]
        assert not [n for n in names if n == "eval" or n.startswith("eval.")], module


def test_only_the_client_and_server_stages_speak_http() -> None:
    speakers = []
    for module in EVAL_MODULES + modules("scorers"):
        names = {n for n, _ in imported(source_tree(module), module)}
        if names & HTTP_MODULES and not module.startswith(HTTP_ALLOWED):
            speakers.append(module)
    assert speakers == []


def test_the_checks_above_can_fail() -> None:
    # the direction check reads a report module importing the run stage as wrong, and a run module importing
    # the records stage as right
    assert stage_of("eval.report.tables") > stage_of("eval.run.client")  # type: ignore[operator]
    assert stage_of("eval.records.final") < stage_of("eval.run.runner")  # type: ignore[operator]
    assert stage_of("eval.commands.run") is None and stage_of("eval.errors") == -1
    assert stage_of("eval.benchmark_registry") < stage_of("eval.prepare.inputs")  # type: ignore[operator]
    assert stage_of("eval.benchmarks.longbench_v2.spec") is None  # a benchmark package: the top
    assert stage_of("eval.benchmarks.plugins") is None
    tree = ast.parse("def f():\n    from eval.run import client\n")
    assert [n for fn in ast.walk(tree) if isinstance(fn, ast.FunctionDef) for n, _ in imported(fn, "m")] == [
        "eval.run"
    ]


def test_no_module_imports_another_modules_underscore_names() -> None:
    """`from eval.x import _name`, or `x._name` on an imported eval module: a private name used across modules
    is a public API in disguise; make it public where it is defined, or move the code that needs it there."""
    wrong = []
    for module in EVAL_MODULES + modules("scorers"):
        tree = source_tree(module)
        ours = set()  # names bound to our modules: import eval.x as y, from eval.commands import run
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module.split(".")[0] in ("eval", "scorers"):
                    names = [a.name for a in node.names]
                    wrong += [f"{module}: from {node.module} import {n}" for n in names if _private(n)]
                    ours |= {a.asname or a.name for a in node.names}
            elif isinstance(node, ast.Import):
                ours |= {
                    a.asname for a in node.names if a.asname and a.name.split(".")[0] in ("eval", "scorers")
                }
        for node in ast.walk(tree):
            name = (
                node.value.id if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) else ""
            )
            if name in ours and _private(node.attr):  # type: ignore[attr-defined]
                wrong.append(f"{module}: {name}.{node.attr}")  # type: ignore[attr-defined]
    assert not wrong, "\n".join(wrong)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_nothing_shipped_uses_the_test_support_package() -> None:
    """tests/support/ (the fake server) is a test double for tests/ and bench/: no module of eval/ or scorers/
    imports anything from tests/."""
    users = [
        f"{module}: {name}"
        for module in EVAL_MODULES + modules("scorers")
        for name, _ in imported(source_tree(module), module)
        if name == "tests" or name.startswith("tests.")
    ]
    assert not users, users


def test_the_wheel_ships_no_test_double() -> None:
    """pyproject's package list (the packages a user installs) holds no tests package, and no shipped package
    folder holds the fake server."""
    import setuptools

    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    shipped = setuptools.find_namespace_packages(str(ROOT), **setup["packages"]["find"])  # namespaces = true
    assert "eval.serve" in shipped and "scorers" in shipped  # the list is read, not empty
    assert not [p for p in shipped if p == "tests" or p.startswith("tests.")], shipped
    doubles = [p for p in shipped if (ROOT / Path(*p.split(".")) / "fake_server.py").exists()]
    assert not doubles, doubles


PUBLIC_PACKAGES = tuple(f"eval.{stage}" for stage in (*STAGES, "commands"))


def is_package(module: str) -> bool:
    return (ROOT / Path(*module.split(".")) / "__init__.py").exists()


def package_of(module: str) -> str:
    """The innermost package holding `module` (a package is its own): its `__all__` is the module's contract."""
    return module if is_package(module) else module.rpartition(".")[0]


def stage_package(module: str) -> str | None:
    """`eval.records.types` -> `eval.records`; None for a base module and the top (cli, demo)."""
    parts = module.split(".")
    name = ".".join(parts[:2])
    return name if len(parts) >= 2 and name in PUBLIC_PACKAGES else None


def public_names(package: str) -> set[str]:
    return set(importlib.import_module(package).__all__)


def reached_names(tree: ast.AST) -> list[tuple[str, str, int]]:
    """(module, name, line) for each name this source takes from an eval module: `from eval.x.y import name`,
    and `alias.name` where `alias` is an eval module (`from eval.records import scenarios as sc`, `import
    eval.x as y`), whose names are read through the module."""
    found: list[tuple[str, str, int]] = []
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.level == 0
            and node.module.startswith("eval.")
        ):
            for a in node.names:
                full = f"{node.module}.{a.name}"
                if is_package(full) or (ROOT / (str(Path(*full.split("."))) + ".py")).exists():
                    aliases[a.asname or a.name] = full
                else:
                    found.append((node.module, a.name, node.lineno))
        elif isinstance(node, ast.Import):
            aliases |= {a.asname: a.name for a in node.names if a.asname and a.name.startswith("eval.")}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            found.append((aliases[node.value.id], node.attr, node.lineno))
    return found


def foreign_private_names(module: str, tree: ast.AST) -> list[str]:
    """The names `module` takes from another stage package that are not in the package's `__all__`."""
    wrong = []
    for there, name, line in reached_names(tree):
        if stage_package(there) in (None, stage_package(module)):
            continue
        package = package_of(there)
        if name not in public_names(package):
            wrong.append(f"{module}:{line} takes {name} from {there}, not in {package}.__all__")
    return wrong


BENCH_MODULES = modules("bench")


def test_a_package_is_reached_only_through_its_public_names() -> None:
    """A module imports from another stage package only the names in that package's `__all__` (its innermost
    package: `eval.run.scenarios` for `eval.run.scenarios.settings`), in either form (docs/architecture.md).
    bench/ is held to the same rule; tests/ are exempt (a unit test tests its module's internals)."""
    assert "bench.bench_replicas" in BENCH_MODULES and "bench" in BENCH_MODULES  # bench/ is read, not empty
    wrong = []
    for module in EVAL_MODULES + BENCH_MODULES:
        wrong += foreign_private_names(module, source_tree(module))
    assert not wrong, "\n".join(wrong)
    # and the check can fail: a name not in __all__, read by import and through a module alias; the same names
    # within their own stage are not checked
    source = (
        "from eval.records.run_folder import write_text\nfrom eval.records import final as f\nf.by_slot\n"
    )
    assert foreign_private_names("eval.run.x", ast.parse(source)) == [
        "eval.run.x:1 takes write_text from eval.records.run_folder, not in eval.records.__all__",
        "eval.run.x:3 takes by_slot from eval.records.final, not in eval.records.__all__",
    ]
    assert foreign_private_names("eval.records.x", ast.parse(source)) == []
    # a bench module is checked against every stage package (it belongs to none); a public name passes, and so
    # do the base modules and the command layer
    bench_source = (
        "from eval.run.passes import run_unit\nfrom eval.run.client import Client\n"
        "from eval.errors import ConfigError\nfrom eval.cli import main\n"
    )
    assert foreign_private_names("bench.x", ast.parse(bench_source)) == [
        "bench.x:1 takes run_unit from eval.run.passes, not in eval.run.__all__"
    ]


# the engine plugin under serve/faults/ is its own distribution (stdlib only, installed into the server's venv)
FACED_PACKAGES = [m for m in EVAL_MODULES if is_package(m) and stage_package(m) and ".faults." not in m]


@pytest.mark.parametrize("package", FACED_PACKAGES)
def test_a_package_names_its_public_names_and_imports_none_of_them(package: str) -> None:
    """Every stage package and subpackage has an `__all__` whose every name resolves to its home module's
    object; importing the package alone imports none of its modules (no import cost, no circle)."""
    code = (
        f"import sys, {package} as p\n"
        f"loaded = sorted(m for m in sys.modules if m.startswith('{package}.'))\n"
        "assert not loaded, loaded\n"
        "assert p.__all__ and len(set(p.__all__)) == len(p.__all__)\n"
        "for n in p.__all__:\n"
        "    try:\n"
        "        getattr(p, n)\n"
        "    except Exception as e:\n"
        "        raise SystemExit(f'{n}: {e!r}')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
