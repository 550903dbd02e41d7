"""The elements per thread of a guarded kernel's winner, read from its winning chain (literal_launch.per_thread):
patch writes a captured launch's grid as ceil(N / (block x K)) only with it."""
from mepgen.optimize.library.literal_launch import per_thread

BLOCK = {"name": "launch_config", "params": {"block": 256}}
HERE = {"name": "inherited", "params": {}}


def test_the_factors_multiply_and_an_inherited_part_is_spelled_by_its_attempt():
    lanes, coarse = {"name": "vector_elements", "params": {"lanes": 4}}, {"name": "coarsen", "params": {"factor": 2}}
    assert per_thread([("library", [BLOCK])]) == 1
    assert per_thread([("library", [lanes]), ("library", [lanes, coarse])]) == 8
    assert per_thread([("inherited", [BLOCK, lanes]), ("library", [HERE, {"name": "restrict_ldg"}])]) == 4
    assert per_thread([("library", [{"name": "coarsen_blocks", "params": {"factor": 2, "dim": "x"}}])]) == 2


def test_anything_of_unknown_effect_gives_no_factor():
    assert per_thread([]) is None
    assert per_thread([("llm", [])]) is None                                  # an LLM's text
    assert per_thread([("library", [HERE])]) is None                           # nothing spells the inherited part
    assert per_thread([("library", [{"name": "tile_stencil", "params": {}}])]) is None
    assert per_thread([("library", [{"name": "coarsen_blocks", "params": {"factor": 2, "dim": "y"}}])]) is None
    assert per_thread([("library", [{"name": "vector_elements", "params": {"lanes": "4"}}])]) is None
