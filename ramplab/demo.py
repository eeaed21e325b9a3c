"""``make demo``: the reference target with embedded Redis, one completion streamed through the
official ``openai`` SDK, TTFT and tokens/s printed.

(Interim: the open-loop 1 → 100 QPS ramp on the local stack replaces this once it lands.)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import httpx
from openai import OpenAI

from target_service.embedded_redis import free_port


def main() -> int:
    port = free_port()
    target = subprocess.Popen(
        [sys.executable, "-m", "target_service", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            if target.poll() is not None:
                print(target.stderr.read().decode() if target.stderr else "", file=sys.stderr)
                return 1
            try:
                if httpx.get(base + "/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                print("demo: the target did not become ready", file=sys.stderr)
                return 1
            time.sleep(0.1)
        print(f"demo: target ready on {base} (embedded Redis)")
        client = OpenAI(base_url=base + "/v1", api_key="demo", max_retries=0)
        # Warm the connection and the SDK's lazy imports so TTFT is the server's, not set-up.
        for _ in client.chat.completions.create(
            model="ramplab-sim-1",
            messages=[{"role": "user", "content": "hi"}],
            max_tokens=1,
            stream=True,
        ):
            pass
        start = time.perf_counter()
        first: float | None = None
        tokens = 0
        stream = client.chat.completions.create(
            model="ramplab-sim-1",
            messages=[{"role": "user", "content": "Tell me about load testing."}],
            stream=True,
            max_tokens=128,
            stream_options={"include_usage": True},
            extra_body={"ignore_eos": True},
        )
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content and first is None:
                first = time.perf_counter()
            if chunk.usage is not None:
                tokens = chunk.usage.completion_tokens
        end = time.perf_counter()
        if first is None:
            print("demo: no token arrived", file=sys.stderr)
            return 1
        rate = (tokens - 1) / (end - first) if tokens > 1 else 0.0
        print(f"demo: TTFT {1000 * (first - start):.1f} ms, {tokens} tokens, {rate:.1f} tokens/s")
        return 0
    finally:
        os.killpg(target.pid, signal.SIGTERM)
        target.wait(timeout=20)


if __name__ == "__main__":
    raise SystemExit(main())
