"""Signing modes under concurrency: throughput, p99 and the lock's share of latency.

Starts one real target process (embedded Redis, admin on), and for each signing mode
(``locked``, ``parallel``, ``ed25519``, ``off``) and each concurrency (1 → 128) keeps that many
streaming requests in flight (closed loop, ``requests_per_level`` requests), reading each stream's
``ramplab-timing`` comment for ``lock_wait_ms`` and ``sign_ms``. In the same run it measures the
machine's RSA-2048 PKCS#1 v1.5 SHA-256 sign rate on one thread with ``cryptography``, and reports
``locked``'s ceiling (its best throughput × ``work_factor`` signatures per response) as a ratio of
that rate. Output: a markdown section on stdout (and into ``--out`` when given).

    python bench/target_signing.py --out docs/benchmarks-signing.md
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from target_service.embedded_redis import free_port  # noqa: E402

ADMIN = "bench-admin-token"
MODES = ["locked", "parallel", "ed25519", "off"]


def rsa_sign_rate(seconds: float = 1.0) -> float:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    message = b"x" * 256
    count = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        key.sign(message, padding.PKCS1v15(), hashes.SHA256())
        count += 1
    return count / (time.perf_counter() - start)


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


async def level(
    url: str, concurrency: int, total: int, body: dict[str, object]
) -> dict[str, float]:
    latencies: list[float] = []
    waits: list[float] = []
    signs: list[float] = []
    remaining = total
    limits = httpx.Limits(max_connections=concurrency + 4, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=120) as client:

        async def user() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                start = time.perf_counter()
                response = await client.post("/v1/chat/completions", json=body)
                latencies.append(time.perf_counter() - start)
                for line in response.text.split("\n"):
                    if line.startswith(": ramplab-timing "):
                        timing = json.loads(line.removeprefix(": ramplab-timing "))
                        waits.append(timing["lock_wait_ms"] / 1000)
                        signs.append(timing["sign_ms"] / 1000)

        start = time.perf_counter()
        await asyncio.gather(*(user() for _ in range(concurrency)))
        elapsed = time.perf_counter() - start
    return {
        "rps": len(latencies) / elapsed,
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": p99(latencies) * 1000,
        "lock_share": statistics.mean(waits) / statistics.mean(latencies),
        "sign_ms": statistics.mean(signs) * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--levels", default="1,8,32,128")
    parser.add_argument("--requests-per-level", type=int, default=384)
    parser.add_argument("--max-tokens", type=int, default=4)
    parser.add_argument("--work-factor", type=int, default=1)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    port = free_port()
    env = {
        **os.environ,
        "APP_CONFIG_FILE": str(REPO / "configs" / "app.toml"),
        "APP_ADMIN_TOKEN": ADMIN,
        "APP_LATENCY__PREFILL_OVERHEAD_MS": "0",
        "APP_LATENCY__ITL_MS": "0",
        "APP_SCHEDULER__MAX_NUM_SEQS": "256",
        "APP_LOG_LEVEL": "warning",
    }
    target = subprocess.Popen(
        [sys.executable, "-m", "target_service", "--port", str(port)],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(url + "/readyz").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("target did not become ready")
            time.sleep(0.1)
        sign_rate = rsa_sign_rate()
        body = {
            "model": "ramplab-sim-1",
            "messages": [{"role": "user", "content": "hi"}],
            "stream": True,
            "max_tokens": args.max_tokens,
            "ignore_eos": True,
        }
        rows: list[tuple[str, int, dict[str, float]]] = []
        for mode in MODES:
            put = httpx.put(
                url + "/admin/config",
                json={"signing": {"mode": mode, "work_factor": args.work_factor}},
                headers={"authorization": f"Bearer {ADMIN}"},
            )
            put.raise_for_status()
            asyncio.run(level(url, 4, 32, body))  # warm-up: connections, threads, key cache
            for concurrency in levels:
                total = max(args.requests_per_level, concurrency * 3)
                rows.append((mode, concurrency, asyncio.run(level(url, concurrency, total, body))))
    finally:
        target.terminate()
        target.wait(timeout=15)

    best = {mode: max(r["rps"] for m, _, r in rows if m == mode) for mode in MODES}
    locked_ceiling = best["locked"] * args.work_factor
    command = "python bench/target_signing.py " + " ".join(sys.argv[1:])
    lines = [
        "## Response signing modes under concurrency",
        "",
        f"Command: `{command.strip()}` (from the repository root, venv Python).",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()};"
        " target (1 process) and load client share the machine. Streams of"
        f" {args.max_tokens} tokens with prefill and ITL set to 0, so signing is a large part of"
        f" each request; work_factor {args.work_factor}; closed loop, ≥"
        f" {args.requests_per_level} requests per level.",
        "",
        "Measured RSA-2048 sign rate (cryptography, one thread, same run):"
        f" **{sign_rate:,.0f}/s**.",
        "",
        "| mode | concurrency | req/s | p50 ms | p99 ms | lock wait share of latency | sign ms |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for mode, concurrency, r in rows:
        lines.append(
            f"| {mode} | {concurrency} | {r['rps']:,.0f} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} |"
            f" {r['lock_share'] * 100:.1f} % | {r['sign_ms']:.3f} |"
        )
    lines += [
        "",
        f"`locked` ceiling: {locked_ceiling:,.0f} signatures/s = "
        f"**{locked_ceiling / sign_rate:.2f} ×** the single-thread RSA sign rate.",
        "Best throughput by mode: "
        + ", ".join(f"{m} {best[m]:,.0f} req/s" for m in MODES)
        + f"; parallel/locked = {best['parallel'] / best['locked']:.2f}, "
        f"off/locked = {best['off'] / best['locked']:.2f}.",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)


if __name__ == "__main__":
    main()
