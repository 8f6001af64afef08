"""The shared store's key: read from a file or the environment, made by ``codemode replicas
keygen``.

``[gateway] shared_store_key_file`` names a file holding 32 random bytes, base64 or hex (only
its owner may read it: mode 0600 or 0400); ``CODEMODE_SHARED_STORE_KEY`` holds the same as
base64 instead. ``shared_store_old_key_files`` (or ``CODEMODE_SHARED_STORE_OLD_KEYS``, base64
keys separated by commas) are kept for reading what the previous key sealed.
"""

from __future__ import annotations

import base64
import binascii
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from codemode.errors import ConfigError
from codemode.replicas.sealing import KEY_BYTES, KeySealer, PlainSealer, Sealer, StoreKey

if TYPE_CHECKING:
    from codemode.config import GatewaySettings

__all__ = [
    "KEY_ENV",
    "OLD_KEYS_ENV",
    "new_key_text",
    "parse_key",
    "read_key_file",
    "store_sealer",
    "write_key_file",
]

KEY_ENV = "CODEMODE_SHARED_STORE_KEY"
OLD_KEYS_ENV = "CODEMODE_SHARED_STORE_OLD_KEYS"
_MAKE = "make one with `codemode replicas keygen PATH`"


def parse_key(text: str, *, origin: str, key: str) -> StoreKey:
    """32 bytes written as base64 (44 characters) or hex (64 characters)."""
    text = text.strip()
    material: bytes | None = None
    if len(text) == 2 * KEY_BYTES:
        try:
            material = bytes.fromhex(text)
        except ValueError:
            material = None
    if material is None:
        try:
            material = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            material = None
    if material is None or len(material) != KEY_BYTES:
        raise ConfigError(
            f"{origin} does not hold a {KEY_BYTES}-byte key written as base64 or hex",
            key=key,
            fix=_MAKE,
        )
    return StoreKey(material, origin)


def read_key_file(path: Path, *, key: str) -> StoreKey:
    """The key in ``path``; refused when anyone but its owner may read or change it."""
    try:
        # Links are followed (a Kubernetes secret is a link); the file's own mode is checked.
        fd = os.open(path, os.O_RDONLY)
    except OSError as error:
        raise ConfigError(
            f"cannot read the key file {path}: {error.strerror}",
            key=key,
            fix=f"point it at a readable file, or {_MAKE}",
        ) from None
    with os.fdopen(fd, "rb") as handle:
        mode = os.fstat(handle.fileno()).st_mode
        if not stat.S_ISREG(mode):
            raise ConfigError(f"the key file {path} is not a regular file", key=key, fix=_MAKE)
        if mode & 0o077:
            raise ConfigError(
                f"the key file {path} may be read or changed by others "
                f"(mode {stat.S_IMODE(mode):04o}), so its key is refused",
                key=key,
                fix=f"run `chmod 600 {path}` (a Kubernetes secret: defaultMode 0400), or pass "
                f"the key in {KEY_ENV} instead",
            )
        data = handle.read(4096)
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        text = ""
    return parse_key(text, origin=f"key file {path}", key=key)


def store_sealer(gateway: GatewaySettings, environ: Mapping[str, str] | None = None) -> Sealer:
    """The sealer for ``gateway``'s shared store: a ``KeySealer`` when a key is configured,
    else a ``PlainSealer``. ``ConfigError`` for a key that cannot be used."""
    environ = os.environ if environ is None else environ
    from_env = environ.get(KEY_ENV, "").strip()
    key_file = gateway.shared_store_key_file
    if from_env and key_file is not None:
        raise ConfigError(
            f"both {KEY_ENV} and gateway.shared_store_key_file are set; which key to use "
            "is ambiguous",
            key="gateway.shared_store_key_file",
            fix="set one of them (to rotate keys, see gateway.shared_store_old_key_files)",
        )
    old = [
        read_key_file(path, key="gateway.shared_store_old_key_files")
        for path in gateway.shared_store_old_key_files
    ]
    old += [
        parse_key(text, origin=f"{OLD_KEYS_ENV} item {index + 1}", key=OLD_KEYS_ENV)
        for index, text in enumerate(environ.get(OLD_KEYS_ENV, "").split(","))
        if text.strip()
    ]
    if key_file is not None:
        current = read_key_file(key_file, key="gateway.shared_store_key_file")
    elif from_env:
        current = parse_key(from_env, origin=KEY_ENV, key=KEY_ENV)
    elif old:
        raise ConfigError(
            "old keys are set for the shared store, but no current key",
            key="gateway.shared_store_old_key_files",
            fix=f"set gateway.shared_store_key_file or {KEY_ENV} as well",
        )
    else:
        return PlainSealer()
    try:
        return KeySealer(current, old)
    except ImportError:
        raise ConfigError(
            "encrypting the shared store needs the cryptography package",
            key="gateway.shared_store_key_file",
            fix="pip install 'codemode[redis]' (or pip install cryptography)",
        ) from None


def new_key_text() -> str:
    """A fresh random key, as base64."""
    return base64.b64encode(os.urandom(KEY_BYTES)).decode()


def write_key_file(path: Path) -> StoreKey:
    """Write a new key to ``path`` (mode 0600, never over an existing file)."""
    text = new_key_text()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        os.fchmod(handle.fileno(), 0o600)  # whatever the umask
        handle.write(text + "\n")
    return parse_key(text, origin=f"key file {path}", key="gateway.shared_store_key_file")
