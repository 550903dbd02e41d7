"""The LLM proposer's parts: an OpenAI-compatible client, a strict reply parser, and guards on untrusted code."""
