"""Everything one target process holds while it serves, built in the app's lifespan."""

from __future__ import annotations

import os
import random
import threading
from dataclasses import dataclass
from typing import Any

from target_service.auth import Authenticator
from target_service.clock import Clock, default_clock
from target_service.faults import FaultInjector
from target_service.generation import Generator
from target_service.inference import InferenceModel
from target_service.keyring import KeyRing
from target_service.metrics import TargetMetrics
from target_service.prefix_cache import PrefixCache
from target_service.ratelimit import RateLimiter
from target_service.redis_pool import RedisPool
from target_service.scheduler import Scheduler, build_scheduler
from target_service.settings import Settings
from target_service.signing import Signer
from target_service.tokenizer import Tokenizer, make_tokenizer
from target_service.usage import UsageStore


@dataclass
class Runtime:
    settings: Settings
    metrics: TargetMetrics
    redis: RedisPool
    scheduler: Scheduler
    generator: Generator
    ring: KeyRing
    auth: Authenticator
    limiter: RateLimiter
    signer: Signer
    faults: FaultInjector
    clock: Clock
    # The admin config version this process has applied (``admin.py``).
    admin_version: int = 0

    @classmethod
    def build(
        cls,
        settings: Settings,
        metrics: TargetMetrics,
        redis: RedisPool,
        tokenizer: Tokenizer | None = None,
        rng: random.Random | None = None,
        clock: Clock | None = None,
    ) -> Runtime:
        clock = clock or default_clock()
        sched = settings.scheduler
        scheduler = build_scheduler(
            sched.kind,
            sched.max_num_seqs,
            sched.max_waiting,
            sched.queue_timeout_s,
            sched.batch_window_ms / 1000.0,
            observer=metrics.observe_scheduler,
            clock=clock.now,
        )
        ring = KeyRing(redis, settings.redis_prefix, settings.auth.jwt_rotation_seconds, metrics)
        signer = Signer(settings.signing, ring, metrics)
        faults = FaultInjector(settings.faults, metrics)
        generator = Generator(
            settings=settings,
            model=InferenceModel(settings.latency, settings.output),
            scheduler=scheduler,
            tokenizer=tokenizer or make_tokenizer(settings.tokenizer),
            metrics=metrics,
            usage=UsageStore(redis, settings.redis_prefix, metrics),
            rng=rng or random.Random(settings.seed),
            signer=signer,
            faults=faults,
            clock=clock,
            prefix_cache=PrefixCache(settings.prefix_cache, metrics),
        )
        return cls(
            settings=settings,
            metrics=metrics,
            redis=redis,
            scheduler=scheduler,
            generator=generator,
            ring=ring,
            auth=Authenticator(settings.auth, ring, metrics),
            limiter=RateLimiter(settings.ratelimit, redis, settings.redis_prefix, metrics),
            signer=signer,
            faults=faults,
            clock=clock,
        )

    def process_info(self) -> dict[str, Any]:
        """Processes and threads, as ``/admin/config`` and the gauges report them."""
        threads = threading.active_count()
        self.metrics.processes.set(self.settings.workers)
        self.metrics.threads.set(threads)
        self.metrics.signing_threads.set(self.signer.threads)
        return {
            "pid": os.getpid(),
            "workers": self.settings.workers,
            "threads": threads,
            "signing_threads": self.signer.threads,
            "cpu_count": os.cpu_count(),
        }
