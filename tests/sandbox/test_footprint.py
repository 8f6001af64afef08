"""What an idle sandbox holds: the guest package comes as bytecode, never compiled inside."""

from __future__ import annotations

import json

from codemode.sandbox import SandboxSession
from codemode.sandbox.launch import guest_package_files

# Imports a guest module the guest has not loaded yet (egress: only with network allowed),
# recording every compile() the import makes: none when its bytecode is used.
_IMPORT_WATCHED = """
import builtins, json, sys
compiled = []
real = builtins.compile
builtins.compile = lambda *a, **k: compiled.append(str(a[1])) or real(*a, **k)
try:
    sys.modules.pop("_codemode_guest.egress", None)
    import _codemode_guest.egress as egress
finally:
    builtins.compile = real
loaded = [sys.modules[n].__spec__ for n in ("_codemode_guest.main", "_codemode_guest.runtime")]
print(json.dumps({
    "compiled": compiled,
    "egress": egress.__spec__.cached,
    "cached": [spec.cached for spec in loaded],
}))
"""


def test_guest_modules_load_from_the_hosts_bytecode(session: SandboxSession) -> None:
    result = session.execute(_IMPORT_WATCHED)
    assert result.status == "ok", result.render_text()
    seen = json.loads(result.stdout)
    assert seen["compiled"] == []
    assert seen["egress"].endswith(".pyc")
    assert all(path.endswith(".pyc") for path in seen["cached"])


def test_bytecode_is_unchecked_and_hashes_its_source() -> None:
    import importlib.util

    files = guest_package_files()
    sources = {name: data for name, data in files.items() if name.endswith(".py")}
    assert set(sources) >= {"main.py", "runtime.py", "wire.py"}
    for name, source in sources.items():
        stem = name.removesuffix(".py")
        (pyc,) = [data for path, data in files.items() if path.startswith(f"__pycache__/{stem}.")]
        assert pyc[:4] == importlib.util.MAGIC_NUMBER
        assert int.from_bytes(pyc[4:8], "little") == 0b01  # hash-based, not checked
        assert pyc[8:16] == importlib.util.source_hash(source)


# The Python layers over C modules the guest uses directly: each idle sandbox would hold them.
_NOT_PRELOADED = ("socket", "selectors", "signal", "threading")


def test_an_idle_guest_holds_no_module_it_does_not_need(session: SandboxSession) -> None:
    result = session.execute(
        f"import sys; print(sorted(n for n in {_NOT_PRELOADED!r} if n in sys.modules))"
    )
    assert result.status == "ok", result.render_text()
    assert result.stdout.strip() == "[]"
