"""mepgen's own transformation library: deterministic, explainable kernel rewrites (the default proposer)."""
