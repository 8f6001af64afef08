"""``python -m codemode`` is the ``codemode`` command."""

from codemode.cli.main import run

run()
