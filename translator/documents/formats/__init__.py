"""One module a format: a reader of units and a writer of translations (document.py)."""
