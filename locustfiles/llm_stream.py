"""Stream OpenAI chat completions from ``--host`` and measure TTFT, ITL, TPOT and TTLT exactly.

    locust -f locustfiles/llm_stream.py --host http://127.0.0.1:8000 --headless -u 10 -r 10 -t 30s \
        --max-tokens 64 --results-dir results/smoke

``ramplab``'s options (``locust -f locustfiles/llm_stream.py --help``) can also come from a Locust
config file or ``RAMPLAB_*`` environment variables.
"""

from ramplab import LLMStreamUser

__all__ = ["LLMStreamUser"]
