"""`__launch_bounds__(threads, min_blocks)`: tells ptxas the block size so it may cap registers per thread
(min_blocks resident blocks per SM: the in-source form of a register cap such as -maxrregcount).

Applies when the launch's block size is a compile-time value over the size symbols and the kernel has
no `__launch_bounds__` yet. The attribute does not change the kernel's type or signature.
"""
from __future__ import annotations

from .base import Rewrite, Transformation, bound_threads, varying_block
from .launch_facts import redefined_sizes
from .source import Refused


class LaunchBounds(Transformation):
    def __init__(self):
        super().__init__("launch_bounds", "__launch_bounds__ and a register cap", {"min_blocks": 2})

    def _threads(self, src, spec, launch) -> int:
        if src.has_launch_bounds():
            raise Refused("the kernel already has __launch_bounds__")
        if "__maxnreg__" in src.head:
            raise Refused("the kernel has __maxnreg__, which nvcc does not allow beside __launch_bounds__")
        if redefined_sizes(src.text):
            raise Refused("tune_params set this kernel's sizes: its own search covers the launch bounds")
        varying = varying_block(spec)
        if varying:
            raise Refused(varying)
        n = bound_threads(spec, launch)
        if n is None:
            raise Refused(f"the block size `{launch['block']}` is not a compile-time value")
        return n

    def space(self, src, spec, launch):
        self._threads(src, spec, launch)
        return {"min_blocks": [1, 2, 4, 8]}

    def apply(self, src, spec, launch, params):
        n = self._threads(src, spec, launch)
        k = int(params.get("min_blocks", 2))
        edit = src.attribute_edit(f"__launch_bounds__({n}, {k})")
        if edit is None:
            raise Refused("neither __global__ nor the kernel's name is spelled in its declaration (macros)")
        text = src.replace([edit])
        return Rewrite(text, f"launch bounds: __launch_bounds__({n}, {k}) lets ptxas cap registers for {k} "
                             f"resident blocks of {n} threads per SM")
