"""The LLM data files: primitives apart from the data sets (run/llm/catalog.py lists those)."""
