"""Stage 1, `mepgen extract`: kernels, launch sites, dependency closures and hotspot ranks, with libclang."""
from .run import ExtractOptions, extract

__all__ = ["ExtractOptions", "extract"]
