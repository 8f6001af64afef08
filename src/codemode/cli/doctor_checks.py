"""The checks behind ``codemode doctor``: what this machine gives the sandbox, and what not.

Each check returns a ``Check``: ``ok``, ``warn`` (works, with less protection or a feature
missing) or ``fail`` (something will not work), with the reason and the fix. ``isolation``
is the one that decides whether code can run safely here at all.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from codemode.config import CodemodeConfig

__all__ = ["Check", "run_checks"]

Level = Literal["ok", "warn", "fail"]
# Checks whose failure means code cannot run isolated here.
ISOLATION_CHECKS = frozenset({"bubblewrap", "user namespaces", "seccomp", "isolation"})
_NODE_COMMANDS = frozenset({"npx", "node", "npm", "pnpm", "bunx"})


@dataclass(frozen=True)
class Check:
    name: str
    level: Level
    detail: str
    fix: str = ""


def _version_of(command: list[str]) -> str:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"({error})"
    return (done.stdout or done.stderr).strip().splitlines()[0] if done.returncode == 0 else "?"


def check_bubblewrap() -> tuple[Check, str | None]:
    from codemode.errors import IsolationUnavailableError
    from codemode.sandbox.backends import find_bwrap

    try:
        path = find_bwrap()
    except IsolationUnavailableError as error:
        return Check("bubblewrap", "fail", error.message, error.fix or ""), None
    return Check("bubblewrap", "ok", f"{path} ({_version_of([path, '--version'])})"), path


def check_user_namespaces(bwrap: str | None) -> Check:
    limit = Path("/proc/sys/user/max_user_namespaces")
    try:
        allowed = int(limit.read_text().strip())
    except (OSError, ValueError):
        allowed = -1
    if allowed == 0:
        return Check(
            "user namespaces",
            "fail",
            "disabled (user.max_user_namespaces = 0)",
            "sysctl -w user.max_user_namespaces=15000 (as root), or run in a VM",
        )
    if bwrap is None:
        return Check("user namespaces", "warn", "not tried: bubblewrap is missing")
    command = [bwrap, "--unshare-user", "--unshare-pid", "--ro-bind", "/", "/", "true"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return Check("user namespaces", "fail", f"bwrap did not run: {error}")
    if done.returncode != 0:
        return Check(
            "user namespaces",
            "fail",
            f"bwrap cannot create them: {done.stderr.strip()[:300]}",
            "allow unprivileged user namespaces (e.g. kernel.apparmor_restrict_unprivileged_userns"
            "=0 on Ubuntu 24.04), or run in a container started with --security-opt "
            "seccomp=unconfined and apparmor=unconfined",
        )
    return Check("user namespaces", "ok", "bwrap can create user and pid namespaces")


def check_seccomp() -> Check:
    from codemode.errors import IsolationUnavailableError
    from codemode.sandbox.seccomp import build_filter_bpf

    try:
        size = len(build_filter_bpf())
    except IsolationUnavailableError as error:
        return Check("seccomp", "fail", error.message, error.fix or "")
    return Check("seccomp", "ok", f"syscall filter compiled ({size} bytes of BPF)")


def check_cgroups() -> Check:
    """How each sandbox limit is held on this machine (kernel, or the host's watch)."""
    from codemode.sandbox.enforcement import detect_enforcement

    enforcement = detect_enforcement()
    how = "; ".join(f"{name}: {way}" for name, way in enforcement.how.items())
    if enforcement.cgroups is not None:
        return Check("cgroups", "ok", f"limits cover every process ({how})")
    if enforcement.unenforced:
        names = ", ".join(enforcement.unenforced)
        return Check(
            "cgroups",
            "warn",
            f"the limit(s) {names} cannot be enforced here ({how})",
            "run codemode as an ordinary user, or give it a writable cgroup hierarchy; "
            f"or accept it by name: sandbox.accept_unenforced_limits = {enforcement.unenforced!r}",
        )
    return Check(
        "cgroups",
        "ok",
        f"no cgroups: the host watches memory and CPU, the kernel caps processes ({how})",
    )


def check_isolation(config: CodemodeConfig) -> Check:
    """Start one real sandbox and prove from inside that it is isolated."""
    from codemode.errors import CodemodeError
    from codemode.sandbox.backends import make_backend
    from codemode.sandbox.isolation import probe_isolation
    from codemode.sandbox.pool import SandboxPool

    if config.sandbox.unsafe_no_isolation:
        return Check(
            "isolation",
            "fail",
            "the config sets sandbox.unsafe_no_isolation = true: code runs on the host",
            "remove unsafe_no_isolation from the config",
        )
    try:
        pool = SandboxPool(make_backend(config.sandbox), 0)
        try:
            sandbox = pool.spawn()
            try:
                report = probe_isolation(sandbox)
            finally:
                sandbox.kill()
        finally:
            pool.close()
    except CodemodeError as error:
        return Check("isolation", "fail", f"no sandbox starts: {error.message}", error.fix or "")
    if report.problems:
        return Check(
            "isolation",
            "fail",
            "the sandbox is not isolated: " + "; ".join(report.problems),
            "see the checks above",
        )
    return Check("isolation", "ok", "a sandbox started and proved it is isolated from inside")


def check_node(config: CodemodeConfig) -> Check:
    wanting = sorted(
        server.name
        for server in config.enabled_servers()
        if server.command and Path(server.command).name in _NODE_COMMANDS
    )
    node = shutil.which("node")
    if node is None:
        level: Level = "fail" if wanting else "warn"
        using = f"; servers that need it: {', '.join(wanting)}" if wanting else ""
        return Check(
            "node",
            level,
            f"Node.js not found: MCP servers from npm (npx ...) will not start{using}",
            "install Node.js 20 or newer (e.g. apt-get install nodejs npm)",
        )
    detail = f"{node} ({_version_of([node, '--version'])})"
    if wanting:
        detail += f"; used by {', '.join(wanting)}"
    return Check("node", "ok", detail)


def check_semantic() -> Check:
    from codemode.search.encoder import (
        INSTALL_HINT,
        missing_modules,
        model_dir,
        onnxruntime_installed,
    )

    missing = missing_modules()
    found = model_dir()
    if not missing and found is not None:
        if onnxruntime_installed():
            return Check("semantic search", "ok", f"available, on ONNX Runtime (model in {found})")
        return Check(
            "semantic search",
            "ok",
            f"available, on numpy: about half ONNX Runtime's speed (model in {found})",
            "pip install onnxruntime onnx",
        )
    lacking = []
    if missing:
        lacking.append(f"the [semantic] extra's modules ({', '.join(missing)})")
    if found is None:
        lacking.append("the model files (codemode model status shows where they are looked for)")
    return Check(
        "semantic search",
        "warn",
        "off: search is lexical only (still works, finds less for loose wording); missing: "
        + " and ".join(lacking),
        INSTALL_HINT,
    )


def check_privacy_scan() -> Check:
    from codemode.privacy.fastscan import native_available

    if native_available():
        return Check("privacy scan", "ok", "native anchors (Hyperscan)")
    return Check(
        "privacy scan",
        "warn",
        "pure-Python anchors: long text is scanned several times slower (about 100 ms for 1 MB "
        "of contact-dense text through a tool, against 38 ms)",
        "pip install hyperscan (or 'codemode[fast]')",
    )


def check_state(config: CodemodeConfig) -> Check:
    state = config.gateway.state_dir.expanduser()
    existing = state
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if os.access(existing, os.W_OK):
        return Check("state", "ok", f"{state} (writable)")
    return Check(
        "state",
        "fail",
        f"{state} is not writable: no audit log and no definition cache",
        "set [gateway] state_dir in the config, or CODEMODE_STATE_DIR, to a writable directory",
    )


def check_private_storage(config: CodemodeConfig) -> Check:
    """State, the package cache and approvals: nothing another local user can read or enter."""
    from codemode.sandbox.packages import cache_root
    from codemode.storage.private import loose_paths

    roots = [config.gateway.state_dir.expanduser(), cache_root(config.sandbox.packages)]
    loose = [found for root in roots for found in loose_paths(root)]
    if not loose:
        shown = ", ".join(str(root) for root in roots)
        return Check("private storage", "ok", f"only you can read {shown}")
    listed = ", ".join(f"{path} ({mode:04o})" for path, mode in loose[:5])
    more = f" and {len(loose) - 5} more" if len(loose) > 5 else ""
    return Check(
        "private storage",
        "warn",
        f"other local users can read or enter: {listed}{more}",
        "run `chmod -R go-rwx` on them (codemode also tightens its stores when it opens them)",
    )


def check_shared_store(url: str) -> Check:
    """``[gateway] shared_store``: the server answers; how many replicas use it now."""
    from codemode.errors import StateStoreError
    from codemode.replicas.connection import SharedRedis

    try:
        redis = SharedRedis(url)
    except StateStoreError as error:
        return Check("shared store", "fail", error.message, error.fix or "")
    try:
        alive = redis.call(
            lambda: sum(1 for _ in redis.client.scan_iter(redis.key("replica", "*")))
        )
    finally:
        redis.close()
    return Check("shared store", "ok", f"{url} answers; {alive} replica(s) alive on it")


def check_replica_tokens(url: str) -> Check:
    """Replicas serving HTTP on the shared store accept the same bearer tokens."""
    from codemode.errors import StateStoreError
    from codemode.replicas.connection import SharedRedis
    from codemode.replicas.tokens import live_token_sets

    try:
        redis = SharedRedis(url)
    except StateStoreError as error:
        return Check("replica tokens", "warn", f"not checked: {error.message}", error.fix or "")
    try:
        sets = live_token_sets(redis)
    except StateStoreError as error:
        return Check("replica tokens", "warn", f"not checked: {error.message}", error.fix or "")
    finally:
        redis.close()
    serving = sum(sets.values())
    if len(sets) <= 1:
        detail = (
            f"{serving} replica(s) serving HTTP, all with the same token set"
            if serving
            else "no replica serves HTTP on this store now"
        )
        return Check("replica tokens", "ok", detail)
    return Check(
        "replica tokens",
        "fail",
        f"{serving} replicas serving HTTP use {len(sets)} different token sets: a client of "
        "one gets 401 from the others behind the load balancer",
        "give every replica the same --token-file (or [gateway.tokens], CODEMODE_TOKENS) and "
        "restart the odd ones",
    )


def check_shared_store_key(config: CodemodeConfig) -> Check:
    """``[gateway] shared_store_key_file`` (or ``CODEMODE_SHARED_STORE_KEY``): a usable key,
    or a warning that the shared store holds vault values unencrypted."""
    from codemode.errors import ConfigError, SharedStoreDecryptError, StateStoreError
    from codemode.replicas.audit import check_digest_key
    from codemode.replicas.connection import SharedRedis
    from codemode.replicas.keys import KEY_ENV, store_sealer

    try:
        sealer = store_sealer(config.gateway)
    except ConfigError as error:
        return Check("shared store key", "fail", error.message, error.fix or "")
    assert config.gateway.shared_store is not None
    try:  # the store's own sealed value says whether this key is the replicas' key
        redis = SharedRedis(config.gateway.shared_store)
        try:
            check_digest_key(redis, sealer)
        finally:
            redis.close()
    except SharedStoreDecryptError as error:
        return Check("shared store key", "fail", error.message, error.fix or "")
    except StateStoreError:
        pass  # the shared store check says it does not answer
    if not sealer.encrypted:
        return Check(
            "shared store key",
            "warn",
            "no key: vault values (the PII kept from the model), checkpoints and results "
            "handed between replicas are stored unencrypted in the shared store",
            "run `codemode replicas keygen PATH` and set [gateway] shared_store_key_file = "
            f'"PATH" (or {KEY_ENV}) on every replica',
        )
    return Check("shared store key", "ok", sealer.describe())


def check_python() -> Check:
    from codemode import __version__

    version = ".".join(map(str, sys.version_info[:3]))
    return Check("python", "ok", f"codemode {__version__} on Python {version} ({sys.executable})")


def run_checks(config: CodemodeConfig) -> list[Check]:
    bubblewrap, bwrap = check_bubblewrap()
    checks = [check_python(), bubblewrap, check_user_namespaces(bwrap), check_seccomp()]
    checks.append(check_cgroups())
    if all(c.level != "fail" for c in checks):
        checks.append(check_isolation(config))
    else:
        checks.append(Check("isolation", "fail", "not tried: see the failures above"))
    checks += [check_node(config), check_semantic(), check_privacy_scan(), check_state(config)]
    checks.append(check_private_storage(config))
    if config.gateway.shared_store:
        checks.append(check_shared_store(config.gateway.shared_store))
        checks.append(check_replica_tokens(config.gateway.shared_store))
        checks.append(check_shared_store_key(config))
    return checks
