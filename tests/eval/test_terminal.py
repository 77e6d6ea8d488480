"""eval.terminal: what lbeval prints holds no secret and no control character; every print goes through it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from eval.terminal import echo, echo_err, inert, printable

ROOT = Path(__file__).resolve().parents[2]
ESCAPES = "\x1b[2J\x1b]0;t\x07"


def test_inert_shows_control_characters_as_escapes() -> None:
    assert inert(f"a{ESCAPES}b") == "a\\x1b[2J\\x1b]0;t\\x07b"
    assert inert("line\n\ttab\r\x00\x7f\x9b") == "line\n\ttab\\x0d\\x00\\x7f\\x9b"
    assert inert("\x1b", mark=lambda e: f"[{e}]") == "[\\x1b]"
    assert inert("plain ünïcode ⟦⟧") == "plain ünïcode ⟦⟧"


def test_echo_redacts_and_neutralises(capsys: pytest.CaptureFixture[str]) -> None:
    echo("error:", f"{ESCAPES} at http://u:pw@h/v1")
    echo_err(f"warning {ESCAPES}")
    out = capsys.readouterr()
    assert out.out == "error: \\x1b[2J\\x1b]0;t\\x07 at http://<redacted>@h/v1\n"
    assert out.err == "warning \\x1b[2J\\x1b]0;t\\x07\n"
    assert printable("--api-key sk-x") == "--api-key <redacted>"


def _print_sites(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.id if isinstance(f, ast.Name) else ast.unparse(f) if isinstance(f, ast.Attribute) else ""
        if name in ("print", "sys.stdout.write", "sys.stderr.write", "tqdm.write"):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}")
    return found


def test_eval_prints_only_through_eval_terminal() -> None:
    """The one print boundary: anything else would let server or model text reach the terminal raw."""
    sites = [
        s for p in sorted((ROOT / "eval").rglob("*.py")) if p.name != "terminal.py" for s in _print_sites(p)
    ]
    assert sites == []
