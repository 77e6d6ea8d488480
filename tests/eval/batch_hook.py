"""Batches the fake server sees as batches by a count of arrivals, never by a time window: `announced_batches`
makes lbeval's batch sender (eval/run/scenarios/execute._send_together) announce each batch's requests to the fake
(FakeServer.expect_batch) just before it sends them, so with BatchEffect(window_s=None) the fake holds each member
until all have arrived and every one is a batch of that size, whatever the machine's load."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from eval.run.scenarios import execute
from tests.support.fake_server import FakeServer


@contextmanager
def announced_batches(*fakes: FakeServer) -> Iterator[list[int]]:
    """While the block runs, every batch lbeval sends is announced to the fake it is sent to (of `fakes`, by
    the sending Client's URL); yields the sizes announced."""
    original = execute._send_together
    sizes: list[int] = []
    by_url = {f.base_url.rstrip("/"): f for f in fakes}

    def announcing(ctx: Any, own: Any, built: Sequence[Any]) -> Any:
        fake = by_url[ctx.client.base_url.rstrip("/")] if len(fakes) > 1 else fakes[0]
        # the bodies as the fake receives them: the openai client merges extra_body into the wire body
        fake.expect_batch([{**b.request, **(b.request.get("extra_body") or {})} for b in built])
        sizes.append(len(built))
        return original(ctx, own, built)

    execute._send_together = announcing  # type: ignore[assignment]
    try:
        yield sizes
    finally:
        execute._send_together = original  # type: ignore[assignment]
