"""translator: English→Chinese neural machine translation, from raw pairs to a scored model."""

__version__ = "0.1.0"
