"""Refuses to run `make test-without-model` where the optional model stack is installed.

That target exists to prove the suite passes on a plain install (lexical search only). If the
[semantic] extra's packages leaked into its virtualenv, the run would test the wrong thing and
still pass, so this check stops it first and says how to fix it.
"""

from __future__ import annotations

import importlib.util
import sys

EXTRA_MODULES = ("tokenizers", "safetensors", "onnxruntime", "onnx")


def main() -> int:
    present = [name for name in EXTRA_MODULES if importlib.util.find_spec(name) is not None]
    from codemode.search.encoder import semantic_available

    if present or semantic_available():
        print(
            f"test-without-model: {sys.prefix} has the optional model stack "
            f"({', '.join(present) or 'the model'}), so it cannot show that search works "
            f"without it; remove that virtualenv (rm -rf {sys.prefix}) and run the target again",
            file=sys.stderr,
        )
        return 1
    print(f"test-without-model: {sys.prefix} has no model stack: search is lexical there")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
