"""eval.terminal: what lbeval prints holds no secret and no control character; every print goes through it."""

from __future__ import annotations

import ast
import io
import unicodedata
from pathlib import Path

import pytest

from eval.terminal import KEPT_FORMAT, PlainLines, echo, echo_err, inert, printable

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
    # eval/serve/faults/ is the vLLM plugin: it runs inside the server's own venv (stdlib only, no lbeval), and
    # what it prints goes to the server's log, which lbeval reads through eval.terminal like any server text
    plugin = ROOT / "eval" / "serve" / "faults"
    sites = [
        s
        for p in sorted((ROOT / "eval").rglob("*.py"))
        if p.name != "terminal.py" and plugin not in p.parents
        for s in _print_sites(p)
    ]
    assert sites == []


def test_progress_bars_off_a_terminal_are_plain_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """tqdm's carriage returns and cursor codes reached non-terminal logs (CI). Off a terminal each
    bar prints plain lines: its first state and its last, with no \\r and no escape sequence."""
    from eval.run.runner import execute_run
    from tests.eval.fake_fixtures import config_for, make_row, write_rows
    from tests.support.fake_server import FakeServer

    inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(0), make_row(1)])
    with FakeServer() as fake:
        execute_run(config_for(fake, inputs, tmp_path / "runs", quiet=False, passes=("cold", "warm")))
    err = capsys.readouterr().err
    assert "\r" not in err and "\x1b" not in err
    lines = err.splitlines()
    for name in ("cold", "warm"):
        bar = [line for line in lines if line.startswith(f"{name:8}:")]
        assert bar[0].startswith(f"{name:8}:   0%") and "0/2" in bar[0]
        assert bar[-1].startswith(f"{name:8}: 100%") and "2/2" in bar[-1] and "errors=0 invalid=0" in bar[-1]
        assert len(bar) == 2  # no line per record: redraws within PLAIN_INTERVAL_S are not printed


def test_plain_lines_drop_cursor_moves_and_carriage_returns() -> None:
    out = io.StringIO()
    stream = PlainLines(out)
    stream.write("\n\x1b[A\rcold: 50%|#####     | 1/2  \r")
    stream.write("\x1b[2K\rcold: 100%|##########| 2/2\n")
    assert out.getvalue() == "cold: 50%|#####     | 1/2\ncold: 100%|##########| 2/2\n"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("a\u202eb", "a\\u202eb"),  # RIGHT-TO-LEFT OVERRIDE: the rest of the line reversed
        ("a\u2066b\u2069", "a\\u2066b\\u2069"),  # LEFT-TO-RIGHT ISOLATE ... POP DIRECTIONAL ISOLATE
        ("\u202a\u202b\u202c\u202d", "\\u202a\\u202b\\u202c\\u202d"),  # embeddings, overrides, pop
        ("\u2067\u2068", "\\u2067\\u2068"),  # RTL and first-strong isolates
        ("\u200e\u200f\u061c", "\\u200e\\u200f\\u061c"),  # LRM, RLM, ARABIC LETTER MARK
        ("x\u200by\u2060z\ufeff", "x\\u200by\\u2060z\\ufeff"),  # zero width space, word joiner, BOM
        ("a\u2028b\u2029c", "a\\u2028b\\u2029c"),  # line and paragraph separators
        ("\U000e0041\U000e007f", "\\U000e0041\\U000e007f"),  # tag characters (invisible ASCII)
        ("soft\u00adhyphen", "soft\\xadhyphen"),  # below U+0100: the \\x form
        ("plain ünïcode ⟦⟧ العربية 中文", "plain ünïcode ⟦⟧ العربية 中文"),  # visible text stays
        ("\u0600\u0661", "\u0600\u0661"),  # ARABIC NUMBER SIGN: shapes the digits after it, kept
    ],
)
def test_bidi_and_format_controls_are_made_visible(text: str, shown: str) -> None:
    assert inert(text) == shown
    assert inert(text, mark=lambda e: f"[{e}]").replace("[", "").replace("]", "") == shown


def test_every_format_and_separator_character_is_visible_or_named_as_kept() -> None:
    """Every Cf, Zl and Zp character of this Python's Unicode database: made visible, or in KEPT_FORMAT."""
    kept = {cp for a, b in KEPT_FORMAT for cp in range(a, b + 1)}
    missed = [
        f"U+{cp:04X}"
        for cp in range(0x110000)
        if unicodedata.category(chr(cp)) in ("Cf", "Zl", "Zp")
        and cp not in kept
        and inert(chr(cp)) == chr(cp)
    ]
    assert missed == []
    assert all(inert(chr(cp)) == chr(cp) for cp in kept)  # kept ones are left as they are
