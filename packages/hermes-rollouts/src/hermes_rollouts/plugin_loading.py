"""Find the object an environment reference points at: an entry point, a module attribute or
a file attribute. Each failure is one :class:`PluginError` line naming the user's option.

``package.module:attr`` is imported as Python imports it. ``path/to/file.py:attr`` is loaded
from the file without being on ``sys.path``: the file becomes a module named after its
resolved path (``hermes_rl_env_<digest>_<stem>``) and is kept in ``sys.modules`` like any
imported module, so annotations resolve and a second reference to the same file reuses it.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.metadata
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

from hermes_protocols import ConfigError

#: the entry-point group installed packages register their environments in
ENTRY_POINT_GROUP = "hermes_rl.environments"


class PluginError(ConfigError):
    """An environment reference cannot be resolved; the message says why and what to do."""


def split_target(reference: str) -> tuple[str, str] | None:
    """``(module or file, attribute)`` for a ``left:attr`` reference, ``None`` for a name."""
    left, colon, attr = reference.rpartition(":")
    if not colon:
        return None
    return left, attr


def is_file_target(left: str) -> bool:
    """Whether the left side of ``left:attr`` names a file (``*.py`` or a path) not a module."""
    return left.endswith(".py") or "/" in left or left.startswith(".")


def entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    """Installed environments: entry-point name -> entry point (first one wins)."""
    found: dict[str, importlib.metadata.EntryPoint] = {}
    for point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(point.name, point)
    return found


def load_entry_point(point: importlib.metadata.EntryPoint, option: str) -> object:
    """The object an installed package registered (its import errors as one line)."""
    where = f"the entry point {point.name!r} ({point.value}) of group {ENTRY_POINT_GROUP!r}"
    try:
        return point.load()
    except ModuleNotFoundError as exc:
        raise PluginError(
            f"{option}: {where} cannot be imported: no module named {exc.name!r}; reinstall "
            "the package that provides it"
        ) from exc
    except AttributeError as exc:
        raise PluginError(f"{option}: {where} names a missing attribute ({exc})") from exc


def load_target(left: str, attr: str, option: str) -> tuple[object, str]:
    """The attribute ``attr`` of the module or file ``left`` and a description of where it
    came from (``module pkg.mod`` / ``file /abs/path.py``)."""
    if not attr:
        raise PluginError(f"{option}: {left}: names no attribute; write {left}:NAME")
    if is_file_target(left):
        module = _load_file(left, option)
        origin = f"file {module.__file__}"
    else:
        module = _import(left, option)
        origin = f"module {left}"
    try:
        return functools.reduce(getattr, attr.split("."), module), origin
    except AttributeError:
        names = sorted(n for n in vars(module) if not n.startswith("_"))
        shown = ", ".join(names[:12]) + (", ..." if len(names) > 12 else "")
        raise PluginError(
            f"{option}: {origin} has no attribute {attr!r} (it defines: {shown or 'nothing'})"
        ) from None


def _import(name: str, option: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        missing = exc.name or name
        if name == missing or name.startswith(f"{missing}."):
            raise PluginError(
                f"{option}: no module named {missing!r}; install the package that provides "
                "it, or give a file: path/to/file.py:NAME"
            ) from exc
        raise PluginError(
            f"{option}: module {name!r} imports {missing!r}, which is not installed; install it"
        ) from exc


def _module_name(path: Path) -> str:
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:12]
    stem = re.sub(r"\W", "_", path.stem)
    return f"hermes_rl_env_{digest}_{stem}"


def _load_file(text: str, option: str) -> ModuleType:
    path = Path(text).expanduser().resolve()
    if not path.is_file():
        raise PluginError(
            f"{option}: no file {text!r} (looked at {path}); give the path of the Python file "
            "that defines the environment"
        )
    name = _module_name(path)
    loaded = sys.modules.get(name)
    if loaded is not None:
        return loaded
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise PluginError(f"{option}: {path} is not a Python file Python can load")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # attrs, dataclasses and typing resolve annotations through it
    try:
        spec.loader.exec_module(module)
    except ModuleNotFoundError as exc:
        del sys.modules[name]
        raise PluginError(
            f"{option}: {path} imports {exc.name!r}, which is not installed; install it, or "
            "make the file a package and install it"
        ) from exc
    except BaseException:
        del sys.modules[name]
        raise
    return module
