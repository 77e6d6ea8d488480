"""eval.redact: the one place secrets are recognised and replaced by `<redacted>`."""

from __future__ import annotations

import pytest

from eval.redact import (
    NO_SECRETS,
    REDACTED,
    redact_argv,
    redact_data,
    redact_env,
    redact_text,
    redacted_errors,
    safe_url,
    secret_flag,
)

KEY = "sk-lbeval-TESTKEY-93f1c"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"http://user:{KEY}@host:8000/v1", "http://<redacted>@host:8000/v1"),
        (f"at http://h/v1?key={KEY}&x=1#f: 404", "at http://h/v1?key=<redacted>&x=<redacted>#f: 404"),
        (f"Authorization: Bearer {KEY}", "Authorization: <redacted>"),
        (f'-H "authorization: {KEY}"', '-H "authorization: <redacted>"'),
        (f"sent bearer {KEY} to", "sent bearer <redacted> to"),
        (f"vllm --api-key {KEY} --port 8000", "vllm --api-key <redacted> --port 8000"),
        (f"--hf-token={KEY}", "--hf-token=<redacted>"),
        (
            f"Namespace(api_key=['{KEY}'], hf_token='{KEY}')",
            "Namespace(api_key=['<redacted>'], hf_token='<redacted>')",
        ),
        (f"HF_TOKEN={KEY} make", "HF_TOKEN=<redacted> make"),
        # not secrets: output limits and flags that merely contain the words
        ("max_tokens=16 --max-num-batched-tokens 256 --ssl-keyfile k.pem", None),
    ],
)
def test_redact_text(text: str, expected: str | None) -> None:
    assert redact_text(text) == (text if expected is None else expected)
    assert KEY not in redact_text(text)


def test_remembered_values_are_redacted_anywhere_but_short_ones_are_not() -> None:
    secrets = NO_SECRETS.with_(
        KEY, "on", None
    )  # "on" is no credential: redacting it would blank ordinary words
    assert redact_text(f"PLAIN={KEY}; x{KEY}y; on", secrets) == "PLAIN=<redacted>; x<redacted>y; on"
    assert redact_text(f"PLAIN={KEY}") == f"PLAIN={KEY}"  # what no one passes is not remembered anywhere
    assert KEY not in repr(secrets) and NO_SECRETS.values == frozenset()  # with_ made a new one


def test_an_error_leaving_a_block_is_said_without_its_secrets() -> None:
    secrets = NO_SECRETS.with_(KEY)
    with pytest.raises(ValueError) as caught, redacted_errors(secrets):
        raise ValueError(f"the server said: bad key {KEY}", 3)
    assert caught.value.args == ("the server said: bad key <redacted>", 3)


def test_secret_flags() -> None:
    assert all(secret_flag(f) for f in ("--api-key", "--api-key=x", "--hf-token", "--token", "--db_password"))
    assert not any(secret_flag(f) for f in ("--max-num-batched-tokens", "--tokenizer", "--key-file", "-k"))


def test_redact_argv_hides_every_value_of_a_secret_flag() -> None:
    argv = ["python", "-m", "vllm", "--api-key", "k1", "k2", "--port", "8000", "--token=t", "--seed", "0"]
    assert redact_argv(argv) == [
        "python", "-m", "vllm", "--api-key", REDACTED, REDACTED, "--port", "8000", f"--token={REDACTED}",
        "--seed", "0",
    ]  # fmt: skip


def test_redact_env_by_name_and_by_value() -> None:
    env = {"HF_TOKEN": "hf_x", "MY_SECRET": "s", "PLAIN": f"a {KEY}", "VLLM_CPU_KVCACHE_SPACE": "1"}
    assert redact_env(env, NO_SECRETS.with_(KEY)) == {
        "HF_TOKEN": REDACTED, "MY_SECRET": REDACTED, "PLAIN": f"a {REDACTED}", "VLLM_CPU_KVCACHE_SPACE": "1",
    }  # fmt: skip


def test_redact_data_walks_json() -> None:
    data = {"argv": ["x", "--api-key", KEY], "env": {"API_KEY": KEY}, "n": [1, {"url": f"http://u:{KEY}@h"}]}
    assert KEY not in repr(redact_data(data))
    assert redact_data(data)["n"][0] == 1


def test_safe_url_keeps_scheme_host_port_path_only() -> None:
    assert safe_url(f"https://u:{KEY}@h:8443/v1?key={KEY}#x") == "https://h:8443/v1"
