"""PII tokenization at the bridge: sensitive values stay on the host, the code sees tokens.

detection   ``Detector`` and ``Detection``, what the scanning modules share
detectors   what counts as sensitive (EMAIL, PHONE, CARD, IBAN, IP, national ids, SECRET)
checks      the checksums and ranges behind them
markup      values split or wrapped by markup (search snippets, highlights, Markdown)
fastscan    the fast path for long text: detectors only in windows around cheap anchors
native      those anchors found in one Hyperscan pass (a dependency on Linux x86_64/aarch64)
overlaps    findings that overlap: merged (the fast path) or the first kept
recall      the vault's values and their fragments, found again in later text
skeletons   a text's letters and digits, and the way back to the text's offsets
exact       where values occur as written, a rare character at a time
fields      glob paths naming fields of a tool result (``contacts[].email``)
vault       value <-> token, per session, host side only
tokenizer   walk results (tokenize) and call arguments (detokenize)
settings    the ``[privacy]`` config table, flow rules
invoker     ``PrivacyInvoker`` (the bridge wrapper) and ``scan_output`` (the second net)
pieces      the pieces of hidden values that call arguments carry (what the host knows)
oracle      ``OracleGuard``: probes of hidden values, their pieces, budgets for search tools
redact      ``redact``: ``<KIND>`` markers for log lines (the audit log uses it)
assertions  ``assert_no_pii`` for tests
"""

from codemode.privacy.assertions import assert_no_pii, find_pii
from codemode.privacy.detectors import BUILTIN_KINDS, Detection, DetectorSet
from codemode.privacy.invoker import DataFlowDeniedError, PrivacyInvoker, scan_output
from codemode.privacy.settings import PrivacySettings
from codemode.privacy.tokenizer import OUTPUT_SOURCE, Tokenizer, detokenize
from codemode.privacy.vault import TokenSource, Vault

__all__ = [
    "BUILTIN_KINDS",
    "OUTPUT_SOURCE",
    "DataFlowDeniedError",
    "Detection",
    "DetectorSet",
    "PrivacyInvoker",
    "PrivacySettings",
    "TokenSource",
    "Tokenizer",
    "Vault",
    "assert_no_pii",
    "detokenize",
    "find_pii",
    "scan_output",
]
