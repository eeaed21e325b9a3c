"""The prefill model (linear + quadratic in the prompt) and the prefix cache: unit checks on
hand-made inputs, then the real app served on 127.0.0.1 reporting ``cached_tokens``."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry

from target_service.inference import InferenceModel
from target_service.metrics import TargetMetrics
from target_service.prefix_cache import PrefixCache, block_hashes, scan
from target_service.settings import LatencySettings, OutputSettings, PrefixCacheSettings
from target_service.tokenizer import ApproxTokenizer
from tests.target.conftest import StartThreadTarget
from tests.target.stress_helpers import ADMIN_TOKEN, chat_body, parse_sse


def words(start: int, count: int) -> str:
    """``count`` distinct one-token words (4 characters each), numbered from ``start``."""
    return " ".join(f"w{index:03x}" for index in range(start, start + count))


def test_prefill_formula_with_and_without_cached_tokens() -> None:
    latency = LatencySettings(
        prefill_overhead_ms=10,
        prefill_per_token_ms=0.01,
        prefill_per_token_sq_ms=1e-6,
        prefill_cached_per_token_ms=0.001,
    )
    model = InferenceModel(latency, OutputSettings())
    # 10 + 1000 × 0.01 + 1000² × 1e-6 = 10 + 10 + 1 ms
    assert model.prefill_s(1000) == pytest.approx(0.021)
    # 600 cached: 10 + 400 × 0.01 + 600 × 0.001 + (1000² − 600²) × 1e-6 = 10 + 4 + 0.6 + 0.64
    assert model.prefill_s(1000, 600) == pytest.approx(0.01524)
    # The defaults keep the old linear model: 20 + 0.05 × P.
    assert InferenceModel(LatencySettings(), OutputSettings()).prefill_s(100) == pytest.approx(
        0.025
    )


def test_block_hashes_follow_the_approximate_tokenizer() -> None:
    text = "Lorem ipsum, dolor sit amet; consectetur adipiscing elit. " * 40
    tokens = ApproxTokenizer().count(text)
    for block in (1, 3, 16, 64):
        assert len(block_hashes(text, block)) == tokens // block
        # The same pass counts the tokens, so the target does not read the prompt twice.
        assert scan(text, block).tokens == tokens
    # A block edge inside a long word: the 9-character word is 3 tokens, cut after 2 of them.
    assert block_hashes("abcdefghi", 2) == [hash((0, "abcdefgh"))]


def test_shared_prefix_shares_exactly_the_leading_blocks() -> None:
    head = words(0, 48)
    one = block_hashes(head + " " + words(100, 40), 16)
    two = block_hashes(head + " " + words(200, 40), 16)
    assert len(one) == len(two) == 5
    assert one[:3] == two[:3]
    assert all(a != b for a, b in zip(one[3:], two[3:], strict=True))


def cached(cache: PrefixCache, text: str) -> int:
    blocks = cache.scan(text)
    return cache.lookup(blocks.hashes, blocks.tokens)


def remember(cache: PrefixCache, text: str) -> None:
    cache.insert(cache.scan(text).hashes)


def make_cache(**settings: Any) -> PrefixCache:
    return PrefixCache(
        PrefixCacheSettings(enabled=True, **settings), TargetMetrics(CollectorRegistry())
    )


def test_lookup_counts_whole_blocks_and_always_computes_the_last_token() -> None:
    cache = make_cache(block_tokens=16)
    text = words(0, 64)
    assert cached(cache, text) == 0
    remember(cache, text)
    # All 4 blocks are cached, but the last token is recomputed: 3 whole blocks count.
    assert cached(cache, text) == 48
    assert cached(cache, text + " tail") == 64
    assert cached(cache, words(0, 20) + " " + words(500, 30)) == 16


def test_lru_bound_evicts_the_tails_of_the_oldest_prompts_first() -> None:
    cache = make_cache(block_tokens=16, max_cached_tokens=96)  # 6 blocks
    old, new = words(0, 64), words(1000, 64)
    remember(cache, old)
    remember(cache, new)
    assert cache.cached_tokens == 96
    # The old prompt lost its last two blocks, not its first ones.
    assert cached(cache, old + " x") == 32
    assert cached(cache, new + " x") == 64
    cache.clear()
    assert cache.cached_tokens == 0
    assert cached(cache, new + " x") == 0


def test_no_room_caches_nothing() -> None:
    cache = make_cache(block_tokens=16, max_cached_tokens=15)
    remember(cache, words(0, 64))
    assert cache.cached_tokens == 0


# --- the real app --------------------------------------------------------------------------

MODEL = {
    "APP_LATENCY__PREFILL_OVERHEAD_MS": "5",
    "APP_LATENCY__PREFILL_PER_TOKEN_MS": "0.01",
    "APP_LATENCY__PREFILL_PER_TOKEN_SQ_MS": "0.00001",
    "APP_LATENCY__PREFILL_CACHED_PER_TOKEN_MS": "0",
    "APP_ADMIN_TOKEN": ADMIN_TOKEN,
}
CACHE = {
    "APP_PREFIX_CACHE__ENABLED": "true",
    "APP_PREFIX_CACHE__BLOCK_TOKENS": "16",
    "APP_PREFIX_CACHE__MAX_CACHED_TOKENS": "4096",
}


def expected_prefill_ms(prompt: int, cached: int = 0) -> float:
    return 5 + (prompt - cached) * 0.01 + (prompt**2 - cached**2) * 0.00001


def server_prefill_ms(response: httpx.Response) -> float:
    found = re.search(r"prefill;dur=([0-9.]+)", response.headers["server-timing"])
    assert found, response.headers["server-timing"]
    return float(found.group(1))


def stream(client: httpx.Client, text: str) -> tuple[dict[str, Any], dict[str, Any], float]:
    """One streamed request: its usage, its timing comment and the Server-Timing prefill."""
    body = chat_body(stream=True, max_tokens=2, stream_options={"include_usage": True})
    body["messages"] = [{"role": "user", "content": text}]
    response = client.post("/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text
    parsed = parse_sse(response.text)
    usage = parsed.chunks[-1]["usage"]
    return usage, parsed.comments["ramplab-timing"], server_prefill_ms(response)


@pytest.fixture
def cached_target(start_thread_target: StartThreadTarget) -> str:
    return start_thread_target({**MODEL, **CACHE}).url


def test_prefill_grows_with_the_prompt_as_configured(
    start_thread_target: StartThreadTarget,
) -> None:
    url = start_thread_target(MODEL).url
    with httpx.Client(base_url=url, timeout=30) as client:
        for prompt in (100, 1000, 3000):
            usage, timing, prefill = stream(client, words(0, prompt))
            assert usage["prompt_tokens"] == prompt
            # The cache is off: the usage body is unchanged (no prompt_tokens_details).
            assert "prompt_tokens_details" not in usage
            # Server-Timing carries the model's value to the µs (3 decimals of a ms).
            assert prefill == pytest.approx(expected_prefill_ms(prompt), abs=0.001)
            assert timing["prefill_ms"] == pytest.approx(expected_prefill_ms(prompt), abs=0.001)
            # The first token went out after the prefill it waited for (never before).
            assert timing["ttft_ms"] >= timing["prefill_ms"]


def test_repeated_prompt_reports_cached_blocks_and_prefills_faster(cached_target: str) -> None:
    text = words(0, 1000)  # 62 whole blocks and 8 tokens over
    with httpx.Client(base_url=cached_target, timeout=30) as client:
        first, _, cold = stream(client, text)
        assert first["prompt_tokens_details"] == {"cached_tokens": 0}
        assert cold == pytest.approx(expected_prefill_ms(1000), abs=0.001)
        again, timing, warm = stream(client, text)
        assert again["prompt_tokens_details"] == {"cached_tokens": 992}
        assert timing["cached_tokens"] == 992
        assert warm == pytest.approx(expected_prefill_ms(1000, 992), abs=0.001)
        assert warm < cold / 2
        # Sharing only the first 20 blocks (320 tokens) of it: 20 blocks.
        shared, _, _ = stream(client, words(0, 330) + " " + words(2000, 600))
        assert shared["prompt_tokens_details"] == {"cached_tokens": 320}
        # Non-streamed: the same field in the body's usage.
        body = chat_body(max_tokens=2)
        body["messages"] = [{"role": "user", "content": text}]
        plain = client.post("/v1/chat/completions", json=body)
        assert plain.json()["usage"]["prompt_tokens_details"] == {"cached_tokens": 992}
        metrics = client.get("/metrics").text
    assert "target_prefix_cache_lookups_total 4.0" in metrics
    assert "target_prefix_cache_hits_total 3.0" in metrics
    assert "target_prefix_cache_hit_tokens_total 2304.0" in metrics


def test_the_bound_evicts_and_an_admin_put_clears(start_thread_target: StartThreadTarget) -> None:
    url = start_thread_target({**MODEL, **CACHE, "APP_PREFIX_CACHE__MAX_CACHED_TOKENS": "1024"}).url
    first, second = words(0, 640), words(1000, 640)  # 40 blocks each; 64 fit
    with httpx.Client(base_url=url, timeout=30) as client:
        stream(client, first)
        stream(client, second)
        # The first prompt kept 24 of its 40 blocks (its head), the second all 40.
        assert stream(client, second)[0]["prompt_tokens_details"]["cached_tokens"] == 624
        assert stream(client, first)[0]["prompt_tokens_details"]["cached_tokens"] == 384
        admin = {"authorization": f"Bearer {ADMIN_TOKEN}"}
        reset = client.put("/admin/config", json={"prefix_cache": {}}, headers=admin)
        assert reset.status_code == 200, reset.text
        assert reset.json()["config"]["prefix_cache"]["enabled"] is True
        assert stream(client, first)[0]["prompt_tokens_details"]["cached_tokens"] == 0
