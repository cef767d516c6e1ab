"""ptxalloc: a register allocator for NVIDIA PTX.

``ptxalloc.allocate`` (the Python API, :func:`ptxalloc.pipeline.allocate`) is imported on first
use, so that ``import ptxalloc`` (and every command's start-up) stays light.
"""

__version__ = "0.1.0"  # kept equal to pyproject.toml's version by tests/unit/test_startup.py


def __getattr__(name: str):
    if name == "allocate":
        from .pipeline import allocate
        return allocate
    raise AttributeError(f"module 'ptxalloc' has no attribute '{name}'")
