"""ptxalloc: a register allocator for NVIDIA PTX."""

__version__ = "0.1.0"
