"""ramplab: open-loop, distributed load generation for streaming LLM APIs."""
