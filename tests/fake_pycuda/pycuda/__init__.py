"""A stand-in for pycuda (tests only, no GPU): tests/test_evaluate_pycuda_sandbox.py puts it on the worker's path."""
