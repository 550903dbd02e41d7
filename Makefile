# mepgen: the two commands a newcomer needs are `make demo` and `make test` (see README.md).
PYTHON ?= python3
PIP ?= $(PYTHON) -m pip
MEPGEN ?= $(PYTHON) -m mepgen.cli
EXAMPLE ?= examples/heatcg
# sizes of the CG kernels that mepgen cannot trace through the CSR struct (`mepgen ready` names them; README.md)
EXAMPLE_SIZES ?= --size N=4194304 --size NROWS=4194304 --size NNZ=20930584
DEMO_KERNEL ?= analysis::dense_matvec

.PHONY: install demo test bench-extract clean

# Installs mepgen (editable) with its test dependencies.
install:
	$(PIP) install -q -e ".[test]"

# The main job on the bundled example: find and rank its kernels, cut every one into an MEP, then build,
# verify and time one of them (on a machine with an NVIDIA GPU; elsewhere the MEP is compiled only).
demo: install
	$(MEPGEN) extract $(EXAMPLE)
	@# exit 3: some kernel needs a person (heatcg's xpay takes a beta computed at run time: `mepgen capture` gives it)
	$(MEPGEN) mep --all -C $(EXAMPLE) $(EXAMPLE_SIZES) || [ $$? -eq 3 ]
	@if nvidia-smi -L >/dev/null 2>&1; then \
		$(MEPGEN) run $(DEMO_KERNEL) -C $(EXAMPLE); \
	else \
		echo "no NVIDIA GPU here: building the MEP of $(DEMO_KERNEL) only (mepgen run needs a GPU)"; \
		$(MAKE) -s -C $(EXAMPLE)/.mepgen/meps/$(subst ::,.,$(DEMO_KERNEL)) && echo "built $(EXAMPLE)/.mepgen/meps/$(subst ::,.,$(DEMO_KERNEL))/mep"; \
	fi

# All tests, on every core (pytest-xdist; the GPU tests one at a time, in one group); those that need a GPU skip
# with a reason on machines without one. One process: python3 -m pytest -q
test: install
	$(PYTHON) -m pytest -q -n auto --dist loadgroup

bench-extract: install
	$(PYTHON) bench/extract_scaling.py

clean:
	rm -rf build dist *.egg-info .pytest_cache $(EXAMPLE)/.mepgen $(EXAMPLE)/build

# `make optimize KERNEL=<kernel of the example>` (APPLY=1 to apply the patch): the same chain an application
# gets by including integrations/make/mepgen.mk, run on the bundled example.
MEPGEN_APP := $(EXAMPLE)
MEPGEN_MEP_FLAGS := $(EXAMPLE_SIZES)
include integrations/make/mepgen.mk
