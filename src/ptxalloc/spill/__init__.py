"""Spilling (SPEC section 5; seed 002 "Spill Code Generation", "Lazy Reload",
"Rematerialization"): spill slots, the rewrite that inserts stores and reloads, rematerialization
and the removal of redundant reloads."""
