"""The run session owns its state (eval/run/session.RunSession): the drivers (runner, replicas, scheduler, ab) tell it
what they found through its methods instead of writing its fields or its manifest, and one function ends every
session (run_to_end). Read from the source: no module of eval/run but session.py assigns a session's `todo`, writes
into its manifest (a session line, the pairing mark, the stats) or calls write_manifest; the drivers end their
sessions through run_to_end (lbeval run's in the scheduler), never session.end."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
DRIVERS = ("eval/run/runner.py", "eval/run/replicas.py", "eval/run/scheduler.py", "eval/run/ab.py")
ENDING = ("eval/run/scheduler.py", "eval/run/ab.py")  # lbeval run's one lifecycle ends in the scheduler
OWNED = ("todo", "manifest", "sessions", "interleaved", "stats", "complete", "warnings")


def _source(rel: str) -> ast.Module:
    return ast.parse((ROOT / rel).read_text(), rel)


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        return node.targets
    if isinstance(node, ast.AugAssign | ast.AnnAssign):
        return [node.target]
    return []


def _writes(tree: ast.Module) -> list[str]:
    """Assignments to a session's or a manifest's owned fields (session.todo = ..., m.sessions[-1] = ...)."""
    found: list[str] = []
    for node in ast.walk(tree):
        for target in _targets(node):
            while isinstance(target, ast.Subscript):
                target = target.value
            text = ast.unparse(target)
            if (
                isinstance(target, ast.Attribute)
                and target.attr in OWNED
                and ("session" in text or "manifest" in text)
            ):
                found.append(f"line {target.lineno}: {text} = ...")
    return found


def _calls(tree: ast.Module, name: str, on: str = "") -> list[str]:
    """Calls of `name` (a method of an object whose expression contains `on`, when given)."""
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        called = (
            func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        )
        owner = ast.unparse(func.value) if isinstance(func, ast.Attribute) else ""
        if called == name and on in owner:
            out.append(f"line {node.lineno}: {ast.unparse(node)[:80]}")
    return out


def test_no_module_but_the_session_writes_its_state() -> None:
    for path in sorted((ROOT / "eval" / "run").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel == "eval/run/session.py":
            continue
        tree = _source(rel)
        assert _writes(tree) == [], rel
        assert _calls(tree, "write_manifest") == [], rel


def test_the_drivers_end_their_sessions_in_one_place() -> None:
    for rel in DRIVERS:
        tree = _source(rel)
        assert _calls(tree, "end", on="session") == [], rel  # session.end only inside run_to_end
        assert bool(_calls(tree, "run_to_end")) == (rel in ENDING), rel
    assert len(_calls(_source("eval/run/scheduler.py"), "run_to_end")) == 1  # one server and replicas
    assert len(_calls(_source("eval/run/ab.py"), "run_to_end")) == 2  # one endpoint per side, and replicas
