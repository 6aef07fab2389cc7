"""Scenarios: inference (``sweep``), LLM serving (``serving/``) and training (``training/``)."""
