"""When the guest must let go of the modules its code imported: only when an execution's
modules differ from the last ones that were any (the catalog changed)."""

from __future__ import annotations

from codemode.bridge.host import ModuleSource
from codemode.sandbox.module_watch import ModuleWatch


class Modules:
    def module_source(self, fullname: str) -> ModuleSource | None:
        return None


def test_the_first_modules_and_the_same_ones_again_are_no_change() -> None:
    watch, modules = ModuleWatch(), Modules()
    assert not watch.changed(modules)  # nothing imported yet: nothing to drop
    assert not watch.changed(modules)


def test_other_modules_are_a_change_once() -> None:
    watch, before, after = ModuleWatch(), Modules(), Modules()
    watch.changed(before)
    assert watch.changed(after)
    assert not watch.changed(after)
    assert watch.changed(before)


def test_an_execution_with_no_modules_changes_nothing() -> None:
    """A checkpoint's own program runs with none to import, between two of the code's."""
    watch, modules = ModuleWatch(), Modules()
    watch.changed(modules)
    assert not watch.changed(None)
    assert not watch.changed(modules)
    assert watch.changed(Modules())
