"""The ``LoadTestShape`` of a ramp run: users sized from Little's law, stop when drained."""

from __future__ import annotations

from locust import LoadTestShape

from ramplab.plugin.plugin import install, plugin_of

install(ramp=True)  # a locustfile exposing this shape is a ramp locustfile


class RampShape(LoadTestShape):
    """Runs on the master: starts the plan on its first tick, then follows the shape's stages."""

    def tick(self) -> tuple[int, float] | None:
        if self.runner is None:
            return None
        engine = plugin_of(self.runner.environment).master_engine
        if engine is None:
            return None
        elapsed = engine.elapsed()
        if engine.finished(elapsed):
            return None
        users = engine.wanted_users(elapsed)
        # Spawn at once: a user that arrives late only adds dropped arrivals.
        return users, float(max(users, 100))
