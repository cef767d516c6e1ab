"""The independent checker (SPEC section 9)."""

from __future__ import annotations


def verify_module_text(module, text, results) -> None:
    """Placeholder until the checker lands: marks nothing verified."""
    for r in results:
        r.verified = None
