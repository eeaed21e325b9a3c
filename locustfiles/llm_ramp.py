"""Open-loop QPS ramps (or closed-loop concurrency steps) of streaming chat completions.

    locust -f locustfiles/llm_ramp.py --host http://127.0.0.1:8000 --headless \
        --ramplab-shape '1,2,5,10,20,50,100@20s/5s' --max-tokens 32 --results-dir results/demo

Distributed: add ``--master --expect-workers N`` here and run N ``--worker`` processes. Locust's
``-u``/``-r`` are ignored: the shape pre-warms users (Little's law) and a worker starts one for
an arrival that finds none free, up to ``--ramplab-max-users``.
"""

from ramplab import RampShape, RampUser

__all__ = ["RampShape", "RampUser"]
