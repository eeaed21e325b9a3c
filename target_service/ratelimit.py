"""Per-client and global rate limits: GCRA in one Lua script, one Redis round trip per request.

GCRA (the generic cell rate algorithm) keeps one number per key, the theoretical arrival time
``TAT``. With ``N`` requests per period ``P`` the emission interval is ``T = P / N`` and the burst
tolerance ``τ = N × T``: a request at ``now`` is allowed iff ``max(TAT, now) + T − τ ≤ now``, and
then ``TAT ← max(TAT, now) + T``. So a fresh client gets ``N`` requests at once, then one every
``T``. A refused request learns exactly when it would pass: ``retry_after = TAT + T − τ − now``,
which becomes ``retry-after-ms`` (exact, rounded up to the millisecond) and ``Retry-After``
(seconds, rounded up).

The script reads the clock with Redis ``TIME``, so every target process shares one clock, checks
the client key and the global key, and writes *both* only when both allow: a request refused by
one limit does not consume the other. Times are integer microseconds (exact in Lua's doubles).

Headers, as the OpenAI API sends them: ``x-ratelimit-limit-requests`` (``N`` of the tighter
scope: the client's when set), ``x-ratelimit-remaining-requests`` (requests still allowed right
now, ``⌊(τ − (TAT − now)) / T⌋``) and ``x-ratelimit-reset-requests`` (time until the bucket is
full again, ``TAT − now``, as ``"1.5s"`` / ``"250ms"`` / ``"6m0s"``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from target_service.metrics import TargetMetrics
from target_service.redis_pool import RedisPool
from target_service.settings import RateLimitSettings

GCRA_LUA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local out = {}
local new_tats = {}
local all_ok = 1
for i = 1, 2 do
  local T = tonumber(ARGV[2 * i - 1])
  local tau = tonumber(ARGV[2 * i])
  if T == 0 then
    out[4 * i - 3] = 1; out[4 * i - 2] = 0; out[4 * i - 1] = 0; out[4 * i] = 0
  else
    local tat = tonumber(redis.call('GET', KEYS[i]) or now)
    if tat < now then tat = now end
    local new_tat = tat + T
    local allow_at = new_tat - tau
    if now < allow_at then
      all_ok = 0
      out[4 * i - 3] = 0; out[4 * i - 2] = 0
      out[4 * i - 1] = allow_at - now; out[4 * i] = tat - now
    else
      new_tats[i] = new_tat
      out[4 * i - 3] = 1
      out[4 * i - 2] = math.floor((tau - (new_tat - now)) / T)
      out[4 * i - 1] = 0; out[4 * i] = new_tat - now
    end
  end
end
if all_ok == 1 then
  for i = 1, 2 do
    if new_tats[i] then
      local ttl_ms = math.ceil((new_tats[i] - now) / 1000) + 1
      redis.call('SET', KEYS[i], string.format('%.0f', new_tats[i]), 'PX', ttl_ms)
    end
  end
end
return out
"""


def reset_text(seconds: float) -> str:
    """OpenAI's duration style: ``"250ms"``, ``"1.5s"``, ``"6m0s"``."""
    if seconds < 1:
        return f"{math.ceil(seconds * 1000)}ms"
    minutes, rest = divmod(seconds, 60)
    if minutes >= 1:
        return f"{int(minutes)}m{rest:.0f}s"
    return f"{rest:.3g}s"


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    scope: str  # the limit that refused, or the one the headers describe
    limit: int
    remaining: int
    retry_after_s: float
    reset_s: float

    def headers(self) -> dict[str, str]:
        if not self.limit:
            return {}
        return {
            "x-ratelimit-limit-requests": str(self.limit),
            "x-ratelimit-remaining-requests": str(self.remaining),
            "x-ratelimit-reset-requests": reset_text(self.reset_s),
        }


UNLIMITED = Decision(True, "none", 0, 0, 0.0, 0.0)


class RateLimiter:
    def __init__(
        self, settings: RateLimitSettings, pool: RedisPool, prefix: str, metrics: TargetMetrics
    ) -> None:
        self.settings = settings
        self._pool = pool
        self._prefix = prefix + "rl:"
        self._metrics = metrics
        self._script = pool.client.register_script(GCRA_LUA)

    @property
    def enabled(self) -> bool:
        return bool(self.settings.client_limit or self.settings.global_limit)

    def _params(self, limit: int) -> tuple[int, int]:
        if limit == 0:
            return 0, 0
        interval_us = max(1, round(self.settings.period_s * 1_000_000 / limit))
        return interval_us, interval_us * limit

    async def check(self, client: str) -> Decision:
        if not self.enabled:
            return UNLIMITED
        s = self.settings
        # The period is part of the key: a limit changed at run time starts from a full bucket.
        period = f"{s.period_s:g}"
        keys = [f"{self._prefix}c:{period}:{client}", f"{self._prefix}g:{period}"]
        args = [*self._params(s.client_limit), *self._params(s.global_limit)]
        raw = await self._pool.run("ratelimit", lambda r: self._script(keys=keys, args=args))
        values = [int(v) for v in raw]
        scopes = [("client", s.client_limit, values[0:4]), ("global", s.global_limit, values[4:8])]
        refused = [(name, limit, v) for name, limit, v in scopes if limit and not v[0]]
        if refused:
            name, limit, v = max(refused, key=lambda item: item[2][2])
            self._metrics.ratelimited_total.labels(name).inc()
            return Decision(False, name, limit, 0, v[2] / 1e6, v[3] / 1e6)
        name, limit, v = next((item for item in scopes if item[1]), scopes[1])
        return Decision(True, name, limit, v[1], 0.0, v[3] / 1e6)
