"""The ramplab reference target: an OpenAI-compatible streaming LLM simulator under stress."""

from target_service.app import create_app
from target_service.settings import Settings, load_settings

__all__ = ["Settings", "create_app", "load_settings"]
