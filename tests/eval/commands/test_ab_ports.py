"""`lbeval ab X X --spec-a S --spec-b S` where S has a fixed port: the second server cannot bind it, and while it
loads, side A's server answers side B's health check. Without a guard lbeval took side B as healthy and sent
both sides to one server (an A/A on one server while the command line asked for two); now the second start
stops with one line naming the variant and the port (exit 78), and side A's server is stopped.

The servers are the tests' fake vLLM (tests/support/fake_server.py) as child processes, each loading for a second
before it binds its port, as vLLM does for a minute.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
from pathlib import Path

import pytest

from eval.cli import main
from eval.errors import ConfigError
from eval.records.run_folder import MANIFEST_NAME, RECORDS_NAME
from eval.serve.launch_specs import LaunchSpec
from eval.serve.process import free_port, launch, start
from tests.eval.fake_fixtures import make_row, write_rows

ROOT = Path(__file__).resolve().parents[3]
CODE = (
    "import sys, time; from tests.support.fake_server import FakeServer; time.sleep(1.0); s = FakeServer(); "
    "s.port = int(sys.argv[1]); s.start(); print('fake up', flush=True); time.sleep(3600)"
)


def specs_file(tmp_path: Path, port: int | str) -> Path:
    path = tmp_path / "specs.toml"
    port_toml = f'"{port}"' if isinstance(port, str) else str(port)
    path.write_text(
        f"""
[variants.fakevllm]
command = [{sys.executable!r}, "-c", {CODE!r}]
args = ["{{port}}"]
env = {{ PYTHONPATH = {str(ROOT)!r} }}
port = {port_toml}
log = {str(tmp_path / "logs" / "{name}-{port}.log")!r}
model = "fake-model"
""",
        encoding="utf-8",
    )
    return path


def ab_argv(tmp_path: Path, specs: Path) -> list[str]:
    inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(0), make_row(1)])
    return ["ab", "fakevllm", "fakevllm", "--spec-a", "fakevllm", "--spec-b", "fakevllm", "--specs", str(specs),
            "--inputs", str(inputs), "--out", str(tmp_path / "runs"), "--passes", "timing", "--timing-reps", "1",
            "--run-id", "aa", "--quiet"]  # fmt: skip


def gone(pid: int) -> bool:
    """No live process has this pid (a zombie awaiting its reaper counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


def test_one_fixed_port_for_both_sides_stops_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    code = main(ab_argv(tmp_path, specs_file(tmp_path, port)))
    err = capsys.readouterr().err
    assert code == 78, err
    assert f"port {port}" in err and "already in use" in err and "Traceback" not in err
    side_b = (
        tmp_path / "runs" / "fakevllm" / "aa-b"
    )  # locked (the locks come before the servers), not written
    assert not (side_b / RECORDS_NAME).exists() and not (side_b / MANIFEST_NAME).exists()  # nothing sent to b
    # side a's server was stopped before main returned (stop() waits for its process group): its pid is gone
    # now, without waiting on a clock; the port may since be anyone's (another test's free_port)
    (pid,) = {int(p) for p in re.findall(r"starting fakevllm \(pid (\d+)\)", err)}
    assert gone(pid)


def test_port_auto_gives_each_side_its_own_server(tmp_path: Path) -> None:
    assert main(ab_argv(tmp_path, specs_file(tmp_path, "auto"))) == 0
    servers = [
        json.loads((tmp_path / "runs" / "fakevllm" / f"aa-{s}" / "servers.jsonl").read_text()) for s in "ab"
    ]
    assert servers[0]["port"] != servers[1]["port"] and servers[0]["log"] != servers[1]["log"]


def test_launch_refuses_a_fixed_port_something_listens_on(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        spec = LaunchSpec(name="v", source="s.toml", command=(sys.executable, "-c", "pass"), port=port)
        with pytest.raises(ConfigError, match=rf"variant v: port {port} on 127.0.0.1 is already in use"):
            launch(spec, log=tmp_path / "v.log")
        with pytest.raises(ConfigError, match="already in use"):
            start(LaunchSpec(name="v", source="s.toml", command=(sys.executable, "-c", "pass")), port=port)
    assert not os.path.exists(tmp_path / "v.log")  # refused before anything started
