"""Per-paper experiment drivers (one module or subpackage per paper)."""
