"""Start the search daemon detached: ``python -I -S detach.py GO_FD COMMAND...``.

Run by ``client.start_in_background`` as a file, not a module, so that this first process
imports neither site-packages nor codemode and costs the search that started it almost nothing.
It forks, and the parent exits at once (its starter reaps it); the child starts a new session,
waits until the starter closes the other end of the pipe on ``GO_FD`` (it has answered its own
search, which the daemon's loading would slow down; at most ``GO_TIMEOUT_S``) and becomes
``COMMAND``, the daemon, by exec, keeping the key's lock fd that it was handed.
"""

from __future__ import annotations

import os
import select
import sys

GO_TIMEOUT_S = 60.0


def main(argv: list[str]) -> None:
    go, command = int(argv[0]), argv[1:]
    if os.fork():
        os._exit(0)
    os.setsid()
    try:
        select.select([go], [], [], GO_TIMEOUT_S)
    finally:
        os.close(go)
    os.execv(command[0], command)  # noqa: S606 - the daemon command client.py built


if __name__ == "__main__":
    main(sys.argv[1:])
