"""The reference solution the checker compares with: its own copy of :mod:`ppo_clip`.

A learner's notebook can replace a function of :mod:`ppo_clip`, on purpose or
by accident (``ppo_clip.ppo_clip_loss = my_loss``, or a line inside their own
function that does it).  If the checker looked its reference up through the
module at check time, that learner's answers would be compared with
themselves and pass, and every step the module calls internally
(``ppo_clip.times_advantage``, ...) could be swapped the same way.

So when the checker is imported, it loads ``ppo_clip.py`` a second time as a
private module, :data:`reference`: the same source file, the same code, but a
namespace no learner's code touches.  Every reference answer, every
breakdown and every variant of a mistake is computed with it.  (The learner's
``ppo_clip`` is left alone; :mod:`.calling` only undoes changes a function
makes to it *while it is being checked*, see :class:`ModuleGuard`.)
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

import ppo_clip as public_ppo_clip

#: The name the private copy is registered under in ``sys.modules``.
REFERENCE_NAME = "ppo_viz.exercises._reference_ppo_clip"


def _private_copy(module: ModuleType, name: str) -> ModuleType:
    """A fresh module executed from ``module``'s source file, registered as ``name``."""
    spec = importlib.util.spec_from_file_location(name, module.__file__)
    if spec is None or spec.loader is None:  # pragma: no cover - ppo_clip is a plain .py file
        raise ImportError(f"cannot load a copy of {module.__name__} from {module.__file__}")
    copy = importlib.util.module_from_spec(spec)
    sys.modules[name] = copy  # as importlib does: the module's own code may look itself up
    spec.loader.exec_module(copy)
    return copy


#: The checker's own ``ppo_clip``, loaded once, when the checker is imported.
reference: ModuleType = _private_copy(public_ppo_clip, REFERENCE_NAME)


class ModuleGuard:
    """Notes the names of a module before a call and puts back whatever the call changed.

    ``with ModuleGuard(module) as guard: ...`` then ``guard.changed`` lists the
    names the block rebound, added or deleted (sorted); each is restored to
    what it was before the block.
    """

    def __init__(self, module: ModuleType | None) -> None:
        self.module = module
        self.changed: tuple[str, ...] = ()
        self._before: dict[str, object] = {}

    def __enter__(self) -> ModuleGuard:
        if self.module is not None:
            self._before = dict(vars(self.module))
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.module is None:
            return
        namespace = vars(self.module)
        changed = {
            name
            for name in set(namespace) | set(self._before)
            if namespace.get(name, _MISSING) is not self._before.get(name, _MISSING)
        }
        for name in changed:
            if name in self._before:
                namespace[name] = self._before[name]
            else:
                del namespace[name]
        self.changed = tuple(sorted(changed))


_MISSING = object()
