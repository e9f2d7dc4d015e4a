"""enginedeck: a terminal console for LLM inference engines."""

__version__ = "0.1.0"
