"""The hitlen scenario's unit of one input: the cold reference, then a prime and a full request per hit length.

Hit lengths are exact because the prompt is sent as token IDs: /tokenize with `messages` (chat inputs: the
chat-templated IDs) or `prompt` (raw inputs), then /v1/completions with `prompt` = the list of IDs, for the
reference and the measured request alike (the pair differs only in the cache).

    hitlen_cold    all n IDs, fresh salt                                    repetition 0
    hitlen_prime   the first P IDs, fresh salt S_L, max_tokens 1            repetition j (the j-th L)
    hitlen_full    all n IDs, salt S_L: expects floor(min(L, n-1)/block)*block cached tokens

P is what the server's cache model needs primed for that hit (eval/records/cache_model.py `prime_tokens`): L on
dense blocks; L + 1 (at most n) on recurrent-state checkpoints, whose prime keeps a checkpoint at its replay
boundary floor((P-1)/block)*block only. The variation records both (`hit_len` L, `prime_len` P).

Default hit lengths, from the block size B (those from 1 to n-1): k*B-1, k*B, k*B+1 for k = 1..3, the last
full block below n (F = (n-1)//B blocks: the full hit), n-1, partial hits at two depths, F//2 blocks ("middle")
and F-1 blocks ("deepest partial"), and, when the chunked-prefill budget b (max_num_batched_tokens) is known,
b-1, b and b+1. A length that two rules give is planned once, under the first rule's class (a budget length is
named by both: "2B (budget)"); `--hit-lengths` replaces the defaults (class "L=<L>"). `classes` (the default
plan's, records/scenarios.DEFAULT_PLAN) keeps only the lengths that one of those rules gives, each named by the
first of its rules among `classes` (so the default plan's rows keep one name on every input: a 967-token
prompt's middle, 384, is "middle" there, "3B" in the full list).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from eval.errors import ConfigError, LbevalError
from eval.prepare.inputs import InputRow
from eval.records import scenarios as sc
from eval.records.cache_model import CacheModel
from eval.records.scenarios import scenario_inputs
from eval.run.client import Client
from eval.run.probe import ProbeResult
from eval.run.reply import RequestFailed
from eval.run.request import RequestSettings
from eval.run.scenarios.base import ScenarioStep, scenario_step
from eval.run.scenarios.planners import PlanContext, Planner, register_planner
from eval.run.scenarios.settings import ScenarioSettings


def hit_lengths(
    n: int,
    block: int,
    budget: int | None = None,
    given: Sequence[int] | None = None,
    classes: Sequence[str] | None = None,
) -> list[tuple[int, str]]:
    """(L, class) pairs for a prompt of n tokens, ordered by L."""
    if given is not None:
        return [(length, f"L={length}") for length in sorted(set(given)) if 1 <= length <= n]
    found: dict[int, str] = {}
    rules: dict[int, list[str]] = {}  # every rule that gives each length, in the order of the rules
    for k in sc.HIT_BLOCK_MULTIPLES:
        for delta, tag in ((-1, "-1"), (0, ""), (1, "+1")):
            found.setdefault(k * block + delta, f"{k}B{tag}")
            rules.setdefault(k * block + delta, []).append(f"{k}B{tag}")
    if budget is not None:
        for delta, tag in ((-1, "-1"), (0, ""), (1, "+1")):
            length, name = budget + delta, f"budget{tag}"
            found[length] = f"{found[length]} ({name})" if length in found else name
            rules.setdefault(length, []).append(name)
    for length, name in n_dependent(n, block):
        found.setdefault(length, name)  # n-dependent: a length the rules above give keeps their class
        rules.setdefault(length, []).append(name)
    if classes is not None:  # each kept length named by the first of its rules the plan keeps
        found = {k: next(r for r in rules[k] if r in classes) for k in found if set(rules[k]) & set(classes)}
    return sorted((length, name) for length, name in found.items() if 1 <= length <= n - 1)


def n_dependent(n: int, block: int) -> list[tuple[int, str]]:
    """The lengths that depend on the prompt: its full hit (`last block`: the F = (n-1)//block blocks a whole
    prompt can hit), n-1, and partial hits at two depths inside it: `middle` (F//2 blocks) and `deepest
    partial` (F-1 blocks, one block short of the full hit). A depth of 0 blocks gives no length."""
    full = (n - 1) // block
    return [
        (full * block, "last block"),
        (n - 1, "n-1"),
        (full // 2 * block, "middle"),
        ((full - 1) * block, "deepest partial"),
    ]


def plan_hitlen(
    ids: Sequence[int],
    model: CacheModel,
    budget: int | None,
    given: Sequence[int] | None,
    max_tokens: int | None,
    classes: Sequence[str] | None = None,
) -> list[ScenarioStep]:
    n, block = len(ids), model.block_size
    lengths = hit_lengths(n, block, budget, given, classes)
    all_ids = tuple(ids)
    cold_vary: dict[str, Any] = {
        sc.PROMPT_IDS: n,
        "hit_lens": [length for length, _ in lengths],
        "hit_classes": [c for _, c in lengths],
    }
    steps = [scenario_step("hitlen_cold", 0, "miss", cold_vary, token_ids=all_ids, max_tokens=max_tokens)]
    for j, (length, name) in enumerate(lengths):
        primed = model.prime_tokens(length, n)
        vary = {
            sc.HIT_LEN: length,
            sc.HIT_CLASS: name,
            sc.EXPECTED_CACHED: model.expected_hit(n, length),
            sc.FULL_CACHED: model.expected_hit(n, n),
            sc.PROMPT_IDS: n,
        }
        if primed != length:
            vary[sc.PRIME_LEN] = primed
        salt = f"L{j}"
        steps.append(
            scenario_step(
                "hitlen_prime", j, "miss", vary, token_ids=all_ids[:primed], salt_key=salt, max_tokens=1
            )
        )
        steps.append(
            scenario_step(
                "hitlen_full", j, "prefix", vary, token_ids=all_ids, salt_key=salt, shared=length,
                max_tokens=max_tokens,
            )
        )  # fmt: skip
    return steps


def prompt_token_ids(
    client: Client, model: str, row: InputRow, chat_template_kwargs: Mapping[str, Any] | None
) -> list[int]:
    """The IDs the server makes of an input's prompt: chat-templated for chat inputs (with the generation
    prompt), as /v1/completions would tokenize the text for raw ones."""
    try:
        if row.mode == "chat":
            kwargs = dict(chat_template_kwargs) if chat_template_kwargs is not None else None
            return client.tokenize(
                model, messages=[{"role": "user", "content": row.prompt}], chat_template_kwargs=kwargs
            )
        return client.tokenize(model, prompt=row.prompt)
    except (RequestFailed, KeyError, TypeError, ValueError) as exc:
        detail = exc.message if isinstance(exc, RequestFailed) else str(exc)
        raise RequestFailed(
            f"/tokenize of {row.dataset}/{row.id} failed: {detail}", retryable=False
        ) from None


def fetch_token_ids(
    s: ScenarioSettings,
    rows: Sequence[InputRow],
    client: Client,
    probe: ProbeResult,
    request: RequestSettings,
) -> dict[int, list[int]]:
    """Prompt token IDs of the inputs the hitlen scenario runs on ({} without it)."""
    if "hitlen" not in s.scenarios:
        return {}
    if not probe.tokenize:
        raise ConfigError("--scenarios hitlen needs the server's POST /tokenize (it sends exact token IDs)")
    keys = [r.key for r in rows]
    try:
        return {
            i: prompt_token_ids(client, probe.model, rows[i], request.chat_template_kwargs)
            for i in scenario_inputs(keys, s.inputs)
        }
    except RequestFailed as exc:
        raise LbevalError(f"--scenarios hitlen: {exc.message}") from None


def _plan(ctx: PlanContext) -> list[ScenarioStep]:
    if ctx.cache_model is None:
        raise ConfigError(
            "--scenarios hitlen needs the server's block size (vllm:cache_config_info in /metrics)"
        )
    s = ctx.settings
    return plan_hitlen(
        ctx.token_ids[ctx.index], ctx.cache_model, s.hit_budget, s.hit_lengths, s.max_tokens, s.hit_classes
    )


PLANNER = register_planner(Planner("hitlen", _plan))
