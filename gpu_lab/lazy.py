"""A package attribute that loads its module on first use (PEP 562 ``__getattr__``), so
importing a package stays cheap: one notebook cell that needs GPU facts does not pay for
pandas, altair or ipywidgets."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_getattr(
    package: str, names: Mapping[str, tuple[str, str | None]], shown_as: str | None = None
) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``names`` maps each public name to
    (submodule, attribute), the attribute ``None`` for the submodule itself. A loaded value
    is kept in the package, so later lookups never come here again."""
    namespace = vars(import_module(package))
    label = shown_as or package

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {label!r} has no attribute {name!r}")
        module, attr = names[name]
        value = import_module(f".{module}", package)
        if attr is not None:
            value = getattr(value, attr)
        namespace[name] = value
        return value

    return __getattr__
