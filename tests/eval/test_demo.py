"""`make demo` (eval/demo.py): the command sequence it runs, with the lbeval CLI and the server start replaced
(no server is started): prepare on the base server, one `lbeval ab` session of both variants with the same
passes and scenarios on both sides, then score, compare and gate."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import eval.demo as demo
from eval.prepare.inputs import inputs_digest
from eval.records.run_folder import SERVERS_LOG
from eval.serve.cpu_features import fp8_kv_cache
from tests.eval.fake_fixtures import make_row, write_rows

URL = "http://127.0.0.1:9/v1"


class _Server:
    base_url = URL

    def describe(self) -> dict[str, Any]:
        return {"spec": "cpu-smollm2", "port": 9}


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *argv: str) -> list[list[str]]:
    calls: list[list[str]] = []
    out = tmp_path / "demo"

    def lbeval(args: list[str]) -> int:
        calls.append(args)
        if args[0] == "prepare":
            write_rows(Path(args[args.index("--out") + 1]), [make_row(0), make_row(1)])
        if args[0] == "ab":  # lbeval ab makes both run folders
            digest = inputs_digest(out / "inputs.jsonl")[:12]
            for variant in args[1:3]:
                (out / "runs" / variant / f"ab-{digest}").mkdir(parents=True, exist_ok=True)
        return 0

    @contextlib.contextmanager
    def start(spec: object, echo: object) -> Iterator[_Server]:
        yield _Server()

    monkeypatch.setattr(demo, "lbeval", lbeval)
    monkeypatch.setattr(demo, "start", start)
    assert demo.main(["--out", str(out), "--quiet", *argv]) == 0
    return calls


def _value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_demo_runs_one_interleaved_session_then_scores_compares_and_gates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(demo, "fp8_kv_cache", lambda: True)  # whatever this machine's CPU
    calls = _run(tmp_path, monkeypatch)
    assert [c[0] for c in calls] == ["prepare", "ab", "score", "score", "compare", "gate"]
    prepare, ab = calls[0], calls[1]
    assert _value(prepare, "--base-url") == URL and _value(prepare, "--source") == "mini"
    inputs = _value(prepare, "--out")
    assert ab[1:3] == ["cpu-smollm2", "cpu-smollm2-fp8kv"] and _value(ab, "--inputs") == inputs
    assert (
        _value(ab, "--base-url-a") == URL and "--base-url-b" not in ab
    )  # lbeval ab starts the variant's spec
    assert _value(ab, "--passes") == "cold,warm,repeat,controls,timing"  # every pass, not ab's timing default
    # one set of scenario options: both sides run the same plan (lbeval ab refuses different ones)
    assert ab.count("--scenarios") == 1 and _value(ab, "--scenarios") == "cache,batch,hitlen,repeats"
    assert _value(ab, "--hit-lengths") == "127,128,129,255,256,257" and _value(ab, "--scenario-inputs") == "2"
    assert "--quiet" in ab
    assert calls[2][1:2] == ["cpu-smollm2"] and calls[3][1:2] == ["cpu-smollm2-fp8kv"]
    assert calls[4][:3] == ["compare", "cpu-smollm2", "cpu-smollm2-fp8kv"]
    # the server the demo started (side a) is noted in side a's run folder, as lbeval ab notes the one it starts
    digest = inputs_digest(Path(inputs))[:12]
    servers = tmp_path / "demo" / "runs" / "cpu-smollm2" / f"ab-{digest}" / SERVERS_LOG
    assert [json.loads(line)["spec"] for line in servers.read_text().splitlines()] == ["cpu-smollm2"]
    assert not (tmp_path / "demo" / "runs" / "cpu-smollm2-fp8kv" / f"ab-{digest}" / SERVERS_LOG).exists()


def test_demo_scenarios_option_applies_to_both_sides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ab = _run(tmp_path, monkeypatch, "--scenarios", "cache", "--seed", "4")[1]
    assert _value(ab, "--scenarios") == "cache" and _value(ab, "--seed") == "4"


@pytest.mark.parametrize(
    ("cpuinfo", "fp8"),
    [
        ("processor\t: 0\nflags\t\t: fpu sse2 avx2 fma\n", False),
        ("processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512bw\n", True),
        ("processor\t: 0\nflags\t\t: avx2 amx_tile amx_bf16\n", True),
        ("processor\t: 0\nFeatures\t: fp asimd sve\n", False),
        ("", False),
    ],
)
def test_fp8_kv_cache_needs_avx512_or_amx(cpuinfo: str, fp8: bool) -> None:
    assert fp8_kv_cache(cpuinfo) is fp8


def test_demo_picks_a_variant_that_starts_on_this_cpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(demo, "fp8_kv_cache", lambda: False)
    calls = _run(tmp_path, monkeypatch)
    assert calls[1][1:3] == ["cpu-smollm2", "cpu-smollm2-before-fix"]
    assert "this CPU has no AVX-512 or AMX" in capsys.readouterr().out
    monkeypatch.setattr(demo, "fp8_kv_cache", lambda: True)
    assert _run(tmp_path / "again", monkeypatch)[1][1:3] == ["cpu-smollm2", "cpu-smollm2-fp8kv"]
