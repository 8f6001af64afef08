"""``codemode doctor``: can code run isolated here, what will not work, and why.

Exits 0 when isolation works (warnings included), 126 when it does not.
"""

from __future__ import annotations

import argparse
import json

from codemode.cli.options import add_config_argument

__all__ = ["HELP", "add_arguments", "run"]

HELP = "check this machine: bubblewrap, namespaces, seccomp, cgroups, Node, state paths"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the checks as JSON")
    parser.add_argument(
        "--no-servers",
        action="store_true",
        help="do not start the configured servers to check their tools' annotations",
    )


def run(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from codemode.cli.doctor_checks import ISOLATION_CHECKS, run_checks
    from codemode.cli.exit_codes import ExitCode
    from codemode.cli.locations import config_in_use, installation_paths
    from codemode.config import default_config, load_config

    source = config_in_use(args.config)
    config = load_config(source) if source is not None else default_config()
    checks = run_checks(config)
    if source is not None and config.servers and not args.no_servers:
        from codemode.cli.doctor_tools import check_annotations

        checks.append(check_annotations(config))
    paths = installation_paths(args.config)
    isolated = not any(c.level == "fail" and c.name in ISOLATION_CHECKS for c in checks)
    if args.json:
        document = {
            "isolated": isolated,
            "checks": [asdict(check) for check in checks],
            "paths": {entry.name: entry.path for entry in paths},
        }
        print(json.dumps(document, indent=2))
    else:
        for check in checks:
            print(f"{check.level:<5} {check.name:<16} {check.detail}")
        print("\nPaths (codemode paths):")
        for entry in paths:
            print(f"  {entry.name:<12} {entry.path or '-'}")
        problems = [check for check in checks if check.level != "ok"]
        if problems:
            print("\nWhat will not work, and the fix:")
            for check in problems:
                print(f"- {check.name}: {check.detail}")
                if check.fix:
                    print(f"  fix: {check.fix}")
        print(
            "\ncode runs isolated here"
            if isolated
            else "\ncode cannot run isolated here: codemode exec and serve will refuse to run it"
        )
    return ExitCode.OK if isolated else ExitCode.SANDBOX
