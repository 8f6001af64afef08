"""``codemode stubs OUTDIR``: writes the package for the config's servers and --openapi specs."""

from __future__ import annotations

import argparse
import json

from codemode.cli import stubs_command


def test_stubs_command_writes_an_importable_package(tmp_path, capsys):
    spec = {
        "openapi": "3.0.0",
        "servers": [{"url": "https://api.example"}],
        "paths": {
            "/things/{id}": {
                "get": {
                    "operationId": "get-thing",
                    "summary": "Get a thing",
                    "parameters": [
                        {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
                    ],
                    "responses": {"200": {"description": "ok"}},
                }
            }
        },
    }
    spec_path = tmp_path / "things.json"
    spec_path.write_text(json.dumps(spec))
    config = tmp_path / "codemode.toml"
    config.write_text('[gateway]\nstate_dir = "state"\n')
    parser = argparse.ArgumentParser()
    stubs_command.add_arguments(parser)
    args = parser.parse_args(
        ["--config", str(config), "--openapi", str(spec_path), str(tmp_path / "out")]
    )
    assert stubs_command.run(args) == 0
    module = tmp_path / "out" / "servers" / "things" / "get_thing.py"
    source = module.read_text()
    compile(source, str(module), "exec")
    assert 'return _call_tool("things", "get-thing", _arguments)' in source
    assert (tmp_path / "out" / "servers" / "_runtime.py").is_file()
    assert "wrote 4 files for 1 tools of 1 server" in capsys.readouterr().out
