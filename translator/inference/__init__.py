"""Translating text: `Translator`, the text path over any engine (text.py), the glossary and
names as one policy (terms.py), the engine protocol (engine.py), our engine with its search
(torch_engine.py, search.py) and CTranslate2's (ct2_engine.py), the registry that finds
engines and searches by name (registry.py), the factory that opens one (factory.py), and
streaming input."""
