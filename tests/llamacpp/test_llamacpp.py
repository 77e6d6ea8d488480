"""lbeval against a real second engine, llama-cpp-python 0.3.36: prepare -> run -> score -> compare -> gate.

Inputs: 1 Qasper and 1 GovReport row of the shipped longbench-mini sample, middle-truncated to a 512-token
input budget through the server's /extras/tokenize and /extras/detokenize, 8 output tokens. What the server
offers (docs/servers/llama-cpp-python.md) decides what is checked:

- verified: the probe's identification, the request fields lbeval needs (repeat_penalty 1.0), the token-id
  mapping (the ids of every output detokenize back to its text), greedy decoding (the chosen token is top-1),
  every command's exit code, and the eviction's effect on latency;
- labelled unverified: every record's cache state (no cached-token count), in the manifest, the records,
  scores.md / scores.json, the compare report and the gate (no verdict unless the policy accepts it).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx2
import pytest

from eval.cli import main
from eval.prepare.inputs import read_inputs
from eval.records.final import select_final
from eval.records.run_folder import LoadedRun, load_run
from eval.serve.process import ManagedServer
from tests.llamacpp.conftest import ROOT

pytestmark = pytest.mark.llamacpp

OUT_TOKENS = 8
BUDGET = 512
VARIANT = "cpu-smollm2-llamacpp"


def lbeval(*argv: str) -> int:
    return main(list(argv))


def pinned_version() -> str:
    for line in (ROOT / "eval" / "serve" / "llamacpp_requirements.txt").read_text().splitlines():
        if line.startswith("llama-cpp-python"):
            return line.split("==", 1)[1].strip()
    raise AssertionError("no llama-cpp-python pin in eval/serve/llamacpp_requirements.txt")


@pytest.fixture(scope="session")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("llamacpp-e2e")


@pytest.fixture(scope="session")
def inputs(llamacpp_server: ManagedServer, work: Path) -> Path:
    path = work / "inputs.jsonl"
    code = lbeval(
        "prepare", "--source", "mini", "--datasets", "qasper,gov_report", "--n", "1",
        "--base-url", llamacpp_server.base_url, "--max-model-len", "4096", "--max-input-tokens", str(BUDGET),
        "--max-tokens", f"qasper={OUT_TOKENS},gov_report={OUT_TOKENS}", "--out", str(path),
    )  # fmt: skip
    assert code == 0
    return path


def run_args(server: ManagedServer, inputs: Path, work: Path, run_id: str, *extra: str) -> list[str]:
    base = ["run", "--variant", VARIANT, "--base-url", server.base_url, "--inputs", str(inputs)]
    return [*base, "--out", str(work / "runs"), "--run-id", run_id, "--quiet", "--top-logprobs", "5", *extra]


@pytest.fixture(scope="session")
def run_a(llamacpp_server: ManagedServer, inputs: Path, work: Path) -> LoadedRun:
    """Every pass (timing: 1 repetition), --cold auto (the default)."""
    assert lbeval(*run_args(llamacpp_server, inputs, work, "a", "--timing-reps", "1")) == 0
    return load_run(work / "runs" / VARIANT / "a")


@pytest.fixture(scope="session")
def run_b(llamacpp_server: ManagedServer, inputs: Path, work: Path, run_a: LoadedRun) -> LoadedRun:
    assert lbeval(*run_args(llamacpp_server, inputs, work, "b", "--passes", "cold,warm,repeat")) == 0
    return load_run(work / "runs" / VARIANT / "b")


def test_prepare_truncates_with_the_servers_extras_tokenizer(inputs: Path) -> None:
    header, rows = read_inputs(inputs)
    assert header.tokenizer.kind == "server" and "llama-cpp-python" in (header.tokenizer.endpoints or "")
    assert sorted(r.dataset for r in rows) == ["gov_report", "qasper"]
    assert all(r.truncated and r.prompt_tokens is not None and r.prompt_tokens <= BUDGET for r in rows)


def test_the_probe_identifies_the_server_and_what_it_lacks(run_a: LoadedRun) -> None:
    m = run_a.manifest
    probe = m.probe
    assert probe.server_kind == "llama-cpp-python" and probe.version == pinned_version()
    assert probe.model == "smollm2-q4_1-gguf"  # --model_alias in eval/serve/variants.toml
    assert probe.cache_verification == "unverified" and not probe.cached_tokens_reported
    caps = probe.capabilities
    assert caps["cached_tokens"].ok is False and caps["cached_tokens"].required is False
    assert caps["cache_salt"].ok is False and caps["metrics"].ok is False
    assert caps["token_ids"].ok is True and "/extras/tokenize" in caps["token_ids"].detail
    assert caps["tokenize"].ok is True
    assert m.settings.cold_mode == "evict" and m.settings.server_fields == {"repeat_penalty": 1.0}
    assert any("UNVERIFIED" in w for w in m.warnings)


def test_every_record_is_answered_and_labelled_unverified(run_a: LoadedRun) -> None:
    m = run_a.manifest
    assert m.complete, m.stats
    finals = select_final(run_a.records).final
    assert len(finals) == m.expected_records == 2 * 7
    for rec in finals.values():
        assert rec.status == "ok" and rec.cache_check == "unverified", (rec.pass_name, rec.error)
        assert rec.usage.cached_tokens is None and rec.expected_cached_tokens is None
        assert rec.settings["repeat_penalty"] == 1.0
        ids = rec.output_token_ids
        assert ids and rec.topk is not None and len(rec.topk.ids) == len(ids)
        for p, token in enumerate(ids):  # greedy: the chosen token is the top-1 alternative
            assert rec.topk.ids[p][0] == token and rec.topk.logprobs[p][0] == rec.topk.chosen_logprobs[p]
        expected = 1 if rec.pass_name.startswith(("timing", "control")) else OUT_TOKENS
        assert len(ids) == expected or rec.finish_reason == "stop"
    assert all(finals[s].cache_salt is None for s in finals if s.pass_name in ("cold", "timing_cold"))
    assert m.stats.counter("evictions") == 2 * 2  # one before each cold and timing_cold request


def test_the_token_ids_are_the_servers_own(llamacpp_server: ManagedServer, run_a: LoadedRun) -> None:
    """The ids lbeval mapped from token text detokenize back to each output (none needed a synthetic id)."""
    for rec in select_final(run_a.records).final.values():
        ids = rec.output_token_ids or []
        assert all(i >= 0 for i in ids), (rec.pass_name, ids)
        resp = httpx2.post(f"{llamacpp_server.root_url}/extras/detokenize", json={"tokens": ids}, timeout=30)
        assert resp.json()["text"].strip() == (rec.output_text or "").strip(), rec.pass_name


PROMPT_EVAL = re.compile(r"prompt eval time =\s*[0-9.]+ ms /\s*([0-9]+) tokens")


def test_eviction_makes_cold_requests_evaluate_the_whole_prompt_and_warm_ones_reuse_it(
    llamacpp_server: ManagedServer, run_a: LoadedRun
) -> None:
    """Not a verification (the server reports nothing to lbeval), but the effect the eviction must have, counted
    in tokens, not timed: llama-cpp-python serves one request at a time and its stderr (the server log) says how
    many prompt tokens each request evaluated ("prompt eval time = ... / N tokens"). A cold request after the
    eviction evaluates its whole prompt; a warm one only its last tokens. Without the eviction only the first
    request of a prompt would evaluate it whole."""
    evaluated = [int(n) for n in PROMPT_EVAL.findall(llamacpp_server.log_path.read_text(errors="replace"))]
    finals = select_final(run_a.records).final
    cold = [r for s, r in finals.items() if s.pass_name == "timing_cold"]
    warm = [r for s, r in finals.items() if s.pass_name == "timing_warm"]
    assert cold and warm and len(evaluated) >= len(finals), (len(evaluated), len(finals))
    # the prompt's length from the cold pass (not streamed: it has usage; the streamed timing requests have none)
    length = {r.example_id: r.usage.prompt_tokens for r in finals.values() if r.pass_name == "cold"}
    for example in {r.example_id for r in cold}:
        prompt = length[example]
        assert prompt is not None
        whole = sum(prompt - 4 <= n <= prompt for n in evaluated)
        expected = sum(r.example_id == example for r in cold)
        assert whole >= 1 + expected, (
            prompt,
            whole,
            expected,
        )  # the cold pass's request, and each timing_cold
    assert sum(n <= 8 for n in evaluated) >= len(warm), evaluated  # each timing_warm reused all but its last


def test_score_labels_the_cache_state_unverified(
    run_a: LoadedRun, capsys: pytest.CaptureFixture[str]
) -> None:
    assert lbeval("score", str(run_a.run_dir)) == 0
    printed = capsys.readouterr().out
    assert "UNVERIFIED" in printed and "every pass met its cache expectation" not in printed
    scores = json.loads((run_a.run_dir / "scores.json").read_text())
    v = scores["cache_verification"]
    assert v["state"] == "unverified" and v["server_kind"] == "llama-cpp-python" and v["cold_mode"] == "evict"
    assert all(c["ok"] == 0 and c["unverified"] == c["n_total"] for c in scores["cache"])
    assert "unverified 2/2" in (run_a.run_dir / "scores.md").read_text()


def test_compare_and_gate(
    run_a: LoadedRun, run_b: LoadedRun, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = str(run_a.run_dir), str(run_b.run_dir)
    out = work / "compare"
    assert lbeval("compare", a, b, "--out", str(out)) == 0
    report = (out / "report.md").read_text()
    assert "UNVERIFIED" in report and "unverified 2/2" in report
    summary = json.loads((out / "summary.json").read_text())
    states = {r["key"]: r["cells"] for r in summary["tables"]["cache"]["rows"]}["cache_state"]
    assert all(str(s).startswith("UNVERIFIED") for s in states.values())
    capsys.readouterr()
    assert lbeval("gate", a, b) == 2  # the rules on cache states cannot judge an unverified cache
    assert "cache state unverified" in capsys.readouterr().out
    policy = work / "accept.toml"
    text = (ROOT / "eval" / "gate" / "policy_default.toml").read_text()
    policy.write_text(text.replace("accept_unverified_cache = false", "accept_unverified_cache = true"))
    code = lbeval("gate", a, b, "--policy", str(policy))
    printed = capsys.readouterr().out
    # a verdict, never no verdict: the exit code is the one the printed verdict states, and no rule is left without
    # data for the unverified cache state (each says it accepted it)
    said = re.search(r"^gate: (PASS|FAIL) \(exit ([01])\)", printed, re.M)
    assert said is not None and code == int(said.group(2)), printed
    assert "accepted by data.accept_unverified_cache" in printed
    assert "has no data: cache state unverified" not in printed
