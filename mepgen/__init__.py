"""mepgen: cut hotspot CUDA kernels into Minimal Executable Programs, optimize them, patch them back."""

__version__ = "0.1.0"
