# mepgen: the two commands a newcomer needs are `make demo` and `make test` (see README.md).
PYTHON ?= python3
PIP ?= $(PYTHON) -m pip
EXAMPLE ?= examples/heatcg
KERNEL ?= cg::spmv_csr

.PHONY: install demo test bench-extract clean

# Installs mepgen (editable) with its test dependencies.
install:
	$(PIP) install -q -e ".[test]"

# The main job on the bundled example: find and rank its kernels.
demo: install
	$(PYTHON) -m mepgen.cli extract $(EXAMPLE)
	cd $(EXAMPLE) && $(PYTHON) -m mepgen.cli list

# All tests; those that need a GPU skip with a reason on machines without one.
test: install
	$(PYTHON) -m pytest -q

bench-extract: install
	$(PYTHON) bench/extract_scaling.py

clean:
	rm -rf build dist *.egg-info .pytest_cache $(EXAMPLE)/.mepgen $(EXAMPLE)/build
