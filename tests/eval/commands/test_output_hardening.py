"""End to end through `lbeval`: no secret reaches a file or the terminal; no server or model text reaches the
terminal or a report with its control characters.

Secrets: a distinctive key goes into a launch spec (args and env, via `${VAR}`) and into a `--base-url`
(userinfo and query); every file under the test's folder (run folders, server logs) and everything printed
is then searched for it. Escapes: a fake server answers with outputs and an error body holding terminal
escapes (clear screen, window title); everything printed and report.html / report.md / scores.md must hold
no raw control character other than newline and tab.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from eval.cli import main
from tests.eval.fake_fixtures import make_row, write_rows
from tests.support.fake_server import FakeServer, Fault

ROOT = Path(__file__).resolve().parents[3]
KEY = "sk-lbeval-TESTKEY-93f1c"
ESCAPES = "\x1b[2J\x1b]0;t\x07"
RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")

SERVER = (
    "import sys, time; from tests.support.fake_server import FakeServer; s = FakeServer(api_key=sys.argv[3]); "
    "s.port = int(sys.argv[1]); s.start(); print('fake up', flush=True); time.sleep(3600)"
)


def _specs(tmp_path: Path) -> Path:
    """Two managed variants whose args and env carry the key from ${LBEVAL_TEST_KEY}; `dies` exits at once."""
    tables = []
    for name, code in (("secretvllm", SERVER), ("dies", "import sys; sys.exit(3)")):
        tables.append(
            f"""
[variants.{name}]
command = [{sys.executable!r}, "-c", {code!r}]
args = ["{{port}}", "--api-key", "${{LBEVAL_TEST_KEY}}", "--hf-token=${{LBEVAL_TEST_KEY}}"]
env = {{ PYTHONPATH = {str(ROOT)!r}, PLAIN = "${{LBEVAL_TEST_KEY}}", HF_TOKEN = "${{LBEVAL_TEST_KEY}}" }}
log = {str(tmp_path / "logs" / "server-{name}-{port}.log")!r}
model = "fake-model"
api_key_env = "LBEVAL_TEST_KEY"
health_timeout = 60
"""
        )
    path = tmp_path / "specs.toml"
    path.write_text("".join(tables), encoding="utf-8")
    return path


def test_a_key_from_specs_and_urls_is_in_no_file_and_no_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LBEVAL_TEST_KEY", KEY)
    specs = _specs(tmp_path)
    inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(0), make_row(1)])
    common = ["--inputs", str(inputs), "--out", str(tmp_path / "runs"), "--retries", "0"]
    # a managed server started with the key (progress bars on: they are output too)
    assert (
        main(["run", "--variant", "secretvllm", "--specs", str(specs), "--passes", "cold,warm", *common]) == 0
    )
    # a managed server that dies: the error line quotes the log's tail (lbeval's header with the argv)
    assert main(["run", "--variant", "dies", "--specs", str(specs), *common]) != 0
    # a --base-url with the key as password and as a query value: the error line names the URL
    with FakeServer(api_key="another-key") as fake:
        url = fake.base_url.replace("//", f"//user:{KEY}@") + f"?key={KEY}"
        assert main(["run", "--variant", "byurl", "--base-url", url, *common]) != 0
    captured = capsys.readouterr()
    files = sorted(p for p in tmp_path.rglob("*") if p.is_file())
    names = {p.name for p in files}
    assert "servers.jsonl" in names and "manifest.json" in names and "records.jsonl" in names
    assert len([p for p in files if p.suffix == ".log"]) == 2
    hits = {str(p.relative_to(tmp_path)): p.read_bytes().count(KEY.encode()) for p in files}
    assert {p: n for p, n in hits.items() if n} == {}
    assert KEY not in captured.out and KEY not in captured.err
    # what was there is still said, with the secret replaced
    servers = next(p for p in files if p.name == "servers.jsonl").read_text()
    assert '"--api-key", "<redacted>"' in servers and '"PLAIN": "<redacted>"' in servers
    assert "exited with code 3" in captured.err and "--api-key '<redacted>'" in captured.err
    assert "http://<redacted>@127.0.0.1" in captured.err and "?key=<redacted>" in captured.err


def test_control_characters_from_a_server_reach_no_terminal_and_no_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(0), make_row(1)])
    runs = tmp_path / "runs"
    common = ["--inputs", str(inputs), "--out", str(runs), "--retries", "0", "--timing-reps", "1", "--quiet"]
    with FakeServer(output_prefix=ESCAPES) as fake:
        assert main(["run", "--variant", "main", "--base-url", fake.base_url, *common]) == 0
    with FakeServer(output_prefix=ESCAPES) as fake:
        fake.add_fault(Fault("divergence", position=1, times=-1))
        assert main(["run", "--variant", "patched", "--base-url", fake.base_url, *common]) == 0
    with FakeServer() as fake:  # every generation answers 400 with escapes in the error message
        fake.add_fault(Fault("4xx", status=400, message=f"bad request {ESCAPES}", times=-1))
        assert main(["run", "--variant", "broken", "--base-url", fake.base_url, *common]) != 0
    assert main(["score", "main", "--runs", str(runs)]) == 0  # prints scores.md
    out = tmp_path / "compare"
    assert (
        main(["compare", "main", "patched", "--runs", str(runs), "--out", str(out)]) == 0
    )  # prints report.md
    captured = capsys.readouterr()
    assert "bad request \\x1b[2J\\x1b]0;t\\x07" in captured.err  # the error line, made visible
    reports = [out / "report.html", out / "report.md", *runs.glob("main/*/scores.md")]
    assert len(reports) == 3
    html = reports[0].read_text(encoding="utf-8")
    assert html.count("<pre>") >= 2 and '<span class="ctl">\\x1b</span>' in html  # the outputs, visibly
    for name, text in [("stdout", captured.out), ("stderr", captured.err)] + [
        (p.name, p.read_text(encoding="utf-8")) for p in reports
    ]:
        assert RAW_CONTROL.findall(text) == [], name
