"""Parsing CUDA with the libclang wheel, shared by the stages that read kernels (extract, mep, optimize)."""
