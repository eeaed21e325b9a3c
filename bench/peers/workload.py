"""What every tool is asked to do: the target's streams (``TARGET_ENV``) and the constant rates
each tool drives them at."""

from __future__ import annotations

import os

RATES = tuple(
    float(v)
    for v in os.environ.get("BENCH_PEER_RATES", "1,2,5,10,20,40,100,150,200,300").split(",")
)
HOLD_S = 8.0
WARM_S = 2.0
TOKENS = 16
ITL_MS = 20.0
PREFILL_MS = 20.0
TARGET_ENV = {
    "APP_LATENCY__PREFILL_OVERHEAD_MS": str(PREFILL_MS),
    "APP_LATENCY__PREFILL_PER_TOKEN_MS": "0",
    "APP_LATENCY__ITL_MS": str(ITL_MS),
    "APP_LATENCY__ITL_JITTER_MS": "0",
    "APP_LATENCY__SLOWDOWN_PER_SEQ": "0",  # streams as long at 300 in flight as at 30
    "APP_SCHEDULER__MAX_WAITING": "2048",
    "APP_SCHEDULER__MAX_NUM_SEQS": "512",
    "APP_SIGNING__MODE": "off",
    "APP_LOG_LEVEL": "warning",
}
MODEL = "ramplab-sim-1"
