"""The tether of a stdio server as a small shell script, where the system has its tools.

``tether.py`` (see there for what a tether does) is a Python process beside every stdio server:
about 10 MiB of RSS and 4.6 MiB of PSS each, most of an idle gateway's memory after its own.
The same job done by ``/bin/sh`` costs about 1.7 MiB of RSS and 0.5 MiB of PSS, with the
process-level parts left to util-linux and coreutils, which ``exec`` and leave no process:

- ``setpriv --pdeathsig TERM`` starts the shell: the kernel sends it SIGTERM once the gateway's
  thread that started it is gone (the event loop's, which lives as long as the gateway), so no
  polling. A gateway already gone when the shell starts is seen in ``$PPID``.
- On SIGTERM, SIGINT or SIGHUP the shell sends SIGTERM to the server's whole process group,
  then SIGKILL after a grace period, and exits with 128 + the signal, as ``tether.py`` does.
- ``setsid`` gives the server a process group (and session) of its own; ``env
  --default-signal`` undoes the SIGINT and SIGQUIT a shell ignores for a background job, and
  the server's input is passed by a descriptor of its own (a background job's standard input
  is otherwise /dev/null); ``setpriv --pdeathsig KILL`` makes the server die with the shell.

``tethered_argv`` uses this where ``setsid``, ``env --default-signal`` (coreutils 8.31) and
``setpriv --pdeathsig`` (util-linux 2.33) work, checked once; elsewhere ``tether.py``.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess

from codemode.connectors.tether import python_tether_argv

__all__ = ["shell_tether_argv", "shell_tools", "tethered_argv"]

_GRACE_S = 2
SCRIPT = f"""\
gateway=$1 setsid=$2 env=$3 setpriv=$4
shift 4
[ "$PPID" = "$gateway" ] || exit 1
case $1 in
  */*) [ -x "$1" ] && [ ! -d "$1" ] ;;
  *) command -v "$1" >/dev/null 2>&1 ;;
esac || {{ echo "codemode: cannot start '$1': not found or not executable" >&2; exit 127; }}
server= pending=
stop() {{
  trap '' TERM INT HUP
  if [ -n "$server" ]; then
    # Its pid too: until it has called setsid it has no process group of its own.
    kill -s TERM -- "-$server" "$server" 2>/dev/null
    # The fallback's subshell must not keep the TERM ignored above: once the server stopped
    # in time, the kill below ends it, or it would wake later and SIGKILL a reused pid.
    (trap - TERM INT HUP; sleep {_GRACE_S}; kill -s KILL -- "-$server" "$server" 2>/dev/null) &
    killer=$!
    wait "$server"
    kill "$killer" 2>/dev/null
    kill -s KILL -- "-$server" 2>/dev/null
  fi
  exit $((128 + $1))
}}
# A signal that comes while the server starts waits until its pid is known: stopping without
# it would leave a server whose death signal was not set yet (setpriv had not run) running.
trap 'pending=15' TERM
trap 'pending=2' INT
trap 'pending=1' HUP
exec 3<&0
"$setsid" "$env" --default-signal=INT,QUIT "$setpriv" --pdeathsig KILL -- "$@" <&3 3<&- &
server=$!
exec 3<&-
trap 'stop 15' TERM
trap 'stop 2' INT
trap 'stop 1' HUP
[ -z "$pending" ] || stop "$pending"
wait "$server"
"""


def tethered_argv(command: str, args: list[str]) -> list[str]:
    """The argv that runs ``command args`` tethered to this process: the shell tether where
    the system has its tools, else ``tether.py``."""
    tools = shell_tools()
    if tools is None:
        return python_tether_argv(command, args)
    return shell_tether_argv(command, args, tools)


def shell_tether_argv(command: str, args: list[str], tools: tuple[str, ...]) -> list[str]:
    """``tools``: ``shell_tools()``'s sh, setsid, env and setpriv."""
    sh, setsid, env, setpriv = tools
    return [
        *(setpriv, "--pdeathsig", "TERM", "--", sh, "-c", SCRIPT, "codemode-tether"),
        *(str(os.getpid()), setsid, env, setpriv, command, *args),
    ]


@functools.cache
def shell_tools() -> tuple[str, ...] | None:
    """Absolute paths of sh, setsid, env and setpriv where they can tether (checked once by
    running them), else None."""
    found = [shutil.which(name) for name in ("sh", "setsid", "env", "setpriv")]
    if any(path is None for path in found):
        return None
    tools = tuple(path for path in found if path is not None)
    sh, _setsid, env, setpriv = tools
    probe = [setpriv, "--pdeathsig", "KILL", "--", env, "--default-signal=INT,QUIT", sh, "-c", ":"]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return tools if done.returncode == 0 else None
