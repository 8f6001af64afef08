"""Built-in demo MCP servers (docs, crm, mail) over stdio, with generated SQLite sample data.

`server_commands()` gives the command line of each; they are codemode's default upstreams.
Importing this package is cheap: the servers and the data generators load only when run.
"""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["ACME_LEAD_ID", "MEETING_DOCUMENT_ID", "SERVER_MODULES", "server_commands"]

# Kept literal here so importing the package does not import the generators.
ACME_LEAD_ID = "LEAD-0137"
MEETING_DOCUMENT_ID = "doc_meeting_2026_q3_review"

SERVER_MODULES = {
    "docs": "codemode.demo.docs_server",
    "crm": "codemode.demo.crm_server",
    "mail": "codemode.demo.mail_server",
}


def server_commands(data_dir: Path | None = None) -> dict[str, list[str]]:
    """Server name -> argv that starts it over stdio with this Python.

    The data directory is resolved now (default: $CODEMODE_DEMO_DATA, else
    ~/.local/share/codemode/demo) and passed explicitly, so servers started with a
    scrubbed environment still find the same data.
    """
    from codemode.demo.data import default_data_dir

    directory = str((data_dir or default_data_dir()).expanduser().resolve())
    return {
        name: [sys.executable, "-m", module, "--data-dir", directory]
        for name, module in SERVER_MODULES.items()
    }
