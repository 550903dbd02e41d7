"""What the stages that talk to an LLM share: the OpenAI-compatible chat client (`client`) and the Jinja
prompt templates of templates/prompts/ (`prompts`). `mepgen optimize` proposes kernels through it
(mepgen/optimize/llm/), `mepgen mep --ask-llm` the fields mepgen could not infer (mepgen/mep/ask_llm.py)."""
