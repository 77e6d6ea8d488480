"""A managed server that dies while lbeval talks to it is reported as dead, with its log and last error (issue
21): not as the "connection refused after N attempts" its death leaves behind."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from eval.cli import main
from eval.errors import LbevalError
from eval.serve.launch_specs import LaunchSpec
from eval.serve.process import last_error, start
from tests.eval.fake_fixtures import make_row, write_rows

# answers /health; the first other request prints an engine traceback's last line and exits without answering
DYING = """
import http.server, os, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/health":
            self.send_response(200); self.end_headers(); self.wfile.write(b"ok"); return
        print("Traceback (most recent call last):", flush=True)
        print("vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.", flush=True)
        print("INFO: shutting down", flush=True)
        os._exit(7)
    do_POST = do_GET
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def write_spec(tmp_path: Path) -> Path:
    script = tmp_path / "dying.py"
    script.write_text(DYING)
    specs = tmp_path / "specs.toml"
    specs.write_text(
        "[variants.dying]\n"
        f"command = [{str(sys.executable)!r}, {str(script)!r}]\n"
        'args = ["{port}"]\n'
        'port = "auto"\n'
        f'log = "{tmp_path}/logs/{{name}}-{{port}}.log"\n'
    )
    return specs


def test_a_server_that_dies_on_the_first_request_is_reported_dead(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(0)])
    argv = ["run", "--variant", "dying", "--specs", str(write_spec(tmp_path)), "--inputs", str(inputs)]
    argv += ["--out", str(tmp_path / "runs"), "--quiet", "--retries", "1", "--backoff", "0"]
    assert main(argv) == 1
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(errors) == 1, errors
    log = next((tmp_path / "logs").glob("dying-*.log"))
    assert errors[0].startswith(
        "lbeval run: error: server dying exited with code 7: its engine died on request 1 (0 answered before it): "
        f"vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.; its log: {log}; "
    )
    assert (
        "last error: vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue." in errors[0]
    )
    assert "(then: cannot list models" in errors[0]  # what it caused, after the cause


def test_a_failure_while_the_server_is_alive_and_healthy_is_left_as_it_is(tmp_path: Path) -> None:
    spec = LaunchSpec(
        name="fine", source="test", command=(sys.executable, "-m", "http.server"),
        args=("{port}", "--bind", "{host}", "--directory", str(tmp_path)),
        log=str(tmp_path / "fine.log"), health_path="/", health_timeout=60.0,
    )  # fmt: skip
    with start(spec) as server, pytest.raises(LbevalError, match="^a 4xx$"), server.reported_if_dead():
        raise LbevalError("a 4xx")


def test_last_error_is_the_last_line_naming_one() -> None:
    log = "INFO ok\nValueError: first\nINFO more\nRuntimeError: second\nINFO: shutting down\n"
    assert last_error(log) == "RuntimeError: second"
    assert last_error("INFO all well\n") is None
