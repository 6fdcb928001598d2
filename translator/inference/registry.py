"""Where engines and searches are found by name (translator/plugins.py's `Registry`).

ENGINES ("translator.engines") holds classes that meet engine.py's `Engine`; SEARCHES
("translator.searches") functions `(decode_cfg, generator) -> Selection` (search.py). Ours
are entry points of this package like anyone's (docs/architecture.md#extending).
"""

from __future__ import annotations

from translator.plugins import Registry

ENGINES = Registry("translator.engines", "decode.engine", "engine", ("auto",))
SEARCHES = Registry("translator.searches", "decode.search", "search")
