"""An engine (ensemble.py) and a search (diverse.py) for translator, found through its
entry-point groups translator.engines and translator.searches."""
