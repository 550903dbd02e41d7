"""The library's transformations, in the order of their usual payoff (structural rewrites first)."""
from __future__ import annotations

from .after_unflatten import AfterUnflatten
from .after_scalar_replace import AfterScalarReplace
from .coarsen import Coarsen
from .coarsen_blocks import CoarsenBlocks
from .compiler_flags import CompilerFlags
from .fuse_updates import FuseUpdates
from .grid_stride import GridStride
from .hoist_loads import HoistLoads
from .int_division import IntDivision
from .launch_bounds import LaunchBounds
from .launch_config import LaunchConfig
from .pack_components import PackComponents
from .privatize import Privatize
from .reciprocal import Reciprocal
from .replicas import DropReplicas, OnOneDimension
from .restrict import Restrict
from .scalar_replace import ScalarReplace
from .split_columns import SplitColumns
from .split_argmax import SplitArgmax
from .tile_argmax import TileArgmax
from .spread_iterations import SpreadIterations
from .spread_loop import SpreadLoop
from .swap_axes import SwapAxes
from .stage_table import StageTable
from .stencil_rows import StencilRows
from .tile_matmul import TileMatmul
from .tile_stencil import TileStencil
from .tile_window import TileWindow
from .tunables import TuneParams
from .unflatten import Unflatten
from .unroll import Unroll
from .vector_elements import VectorElements
from .vector_loads import VectorLoads
from .warp_row import WarpPerRow
from .warp_row_passes import WarpRowPasses
from .warp_atomics import WarpAtomics
from .warp_reduce import WarpReduce


def all_transformations():
    # OnOneDimension: those that need a 1D launch also apply to 1D work on a 2D launch (replicas.py)
    return [AfterScalarReplace(TileMatmul()), AfterUnflatten(TileStencil()), StencilRows(), TileWindow(),
            WarpPerRow(), WarpRowPasses(), OnOneDimension(SpreadLoop()), SpreadIterations(), Privatize(), WarpReduce(), WarpAtomics(),
            OnOneDimension(AfterScalarReplace(SplitColumns(), start="zero")), OnOneDimension(TileArgmax()),
            OnOneDimension(SplitArgmax()), SwapAxes(), OnOneDimension(Unflatten()), DropReplicas(), ScalarReplace(),
            FuseUpdates(), StageTable(), HoistLoads(), Reciprocal(), PackComponents(), CoarsenBlocks(), VectorLoads(), OnOneDimension(VectorElements()),
            OnOneDimension(Coarsen()), OnOneDimension(GridStride()),
            LaunchConfig(), TuneParams(),
            IntDivision(), Restrict(), Unroll(), LaunchBounds(), CompilerFlags()]


def in_order(applicable: list, src, spec, of=lambda item: item) -> list:
    """The applicable transformations (or items holding one: `of` finds it) in the order they are tried on this
    kernel: the catalog's order, except that one the kernel's text puts forward (`Transformation.leads`: fast math
    where a `powf` or `sqrtf` is computed in a loop) comes second, right after the catalog's first, so that a
    limited time per kernel still reaches it and the best structural rewrite alike."""
    lead = [a for a in applicable if of(a).leads(src, spec)]
    rest = [a for a in applicable if a not in lead]
    return rest[:1] + lead + rest[1:]
