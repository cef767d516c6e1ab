"""ptxalloc: a register allocator for NVIDIA PTX."""

__version__ = "0.1.0"
from .pipeline import allocate  # noqa: E402,F401  (the Python API: ptxalloc.allocate)
