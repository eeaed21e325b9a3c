"""A real engine on this machine: vLLM's CPU build serving a tiny model made offline.

``install`` builds vLLM's venv (a peer venv of ``bench/peer_env.py``), ``model`` makes the model
and its tokenizer from a seed, ``server`` starts vLLM on loopback, waits until it answers and stops
it; ``errors.EngineError`` says why any of it cannot happen here. ``python -m bench.engine`` drives
them by hand; ``tests/engine/`` (the ``engine`` marker) uses them. Figures: docs/engines.md.
"""
