"""Reports: what the analyses and allocators found, as text and as JSON."""
