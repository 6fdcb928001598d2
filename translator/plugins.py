"""Plug-ins found by name: the entry points of a group (engines and searches:
inference/registry.py; document formats: documents/). Nothing is imported until its name
is asked for; docs/architecture.md#extending says how a package adds one.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Any

from translator.errors import UserError


class Registry:
    """The named plug-ins of one entry-point group."""

    def __init__(self, group: str, key: str, kind: str, also: tuple[str, ...] = ()):
        self.group, self.key, self.kind = group, key, kind  # key: the config key naming one
        self.also = also  # what else the key takes (decode.engine's auto)
        self._added: dict[str, Any] = {}
        self._loaded: dict[str, Any] = {}

    def register(self, name: str, plugin: Any) -> Any:
        """`plugin` under `name` for this process (before the entry points of that name)."""
        self._added[name] = plugin
        self._loaded.pop(name, None)
        return plugin

    def names(self) -> list[str]:
        """Every name there is, sorted (nothing imported)."""
        return sorted({point.name for point in entry_points(group=self.group)} | set(self._added))

    def get(self, name: str) -> Any:
        """The plug-in called `name`; a name there is not is one UserError that lists them."""
        if name in self._added:
            return self._added[name]
        if name not in self._loaded:
            points = [point for point in entry_points(group=self.group) if point.name == name]
            if not points:
                raise UserError(
                    f"{self.key} = {name!r}: there is no such {self.kind} (there are: "
                    f"{', '.join([*self.also, *self.names()])}; a package adds one through "
                    f"the entry-point group {self.group})"
                )
            try:
                self._loaded[name] = points[0].load()
            except ImportError as exc:
                raise UserError(f"{self.kind} {name!r} cannot be loaded: {exc}") from None
        return self._loaded[name]

    def loaded(self) -> dict[str, Any]:
        """Every plug-in, imported (for the rules that ask each, e.g. decode.engine auto)."""
        return {name: self.get(name) for name in self.names()}
