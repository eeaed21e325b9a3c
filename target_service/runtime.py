"""Everything one target process holds while it serves, built in the app's lifespan."""

from __future__ import annotations

import random
from dataclasses import dataclass

from redis.asyncio import Redis

from target_service.generation import Generator
from target_service.inference import InferenceModel
from target_service.metrics import TargetMetrics
from target_service.scheduler import Scheduler, build_scheduler
from target_service.settings import Settings
from target_service.tokenizer import ApproxTokenizer, Tokenizer
from target_service.usage import UsageStore


@dataclass
class Runtime:
    settings: Settings
    metrics: TargetMetrics
    redis: Redis
    scheduler: Scheduler
    generator: Generator

    @classmethod
    def build(
        cls,
        settings: Settings,
        metrics: TargetMetrics,
        redis: Redis,
        tokenizer: Tokenizer | None = None,
        rng: random.Random | None = None,
    ) -> Runtime:
        sched = settings.scheduler
        scheduler = build_scheduler(
            sched.kind,
            sched.max_num_seqs,
            sched.max_waiting,
            sched.queue_timeout_s,
            sched.batch_window_ms / 1000.0,
            observer=metrics.observe_scheduler,
        )
        generator = Generator(
            settings=settings,
            model=InferenceModel(settings.latency, settings.output),
            scheduler=scheduler,
            tokenizer=tokenizer or ApproxTokenizer(),
            metrics=metrics,
            usage=UsageStore(redis, metrics),
            rng=rng or random.Random(settings.seed),
        )
        return cls(settings, metrics, redis, scheduler, generator)
