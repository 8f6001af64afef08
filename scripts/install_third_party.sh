#!/usr/bin/env bash
# Installs the third-party MCP servers the tests run against. Idempotent; run by `make third-party`.
#   npm:  third_party/node_modules   (pinned by third_party/package.json and its lock file;
#         includes Node.js 22 from the npm package `node`, for the MCP conformance suite)
#   PyPI: .third_party/<server>/     (one virtualenv per server, so their `mcp` pins never meet ours)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

PYTHON=${PYTHON:-python3}
# name=requirement [extra requirements...]; `mcp<2` where the server breaks under mcp 2.
PYPI_SERVERS=(
  "mcp-server-git=mcp-server-git==2026.10.19"
  "mcp-server-time=mcp-server-time==2026.10.19"
)

command -v node >/dev/null || { echo "install_third_party: node is missing (apt-get install nodejs npm)" >&2; exit 1; }
command -v npm >/dev/null || { echo "install_third_party: npm is missing (apt-get install npm)" >&2; exit 1; }

cd "$ROOT/third_party"
npm_stamp=node_modules/.codemode-installed
wanted=$(cat package.json package-lock.json 2>/dev/null | sha256sum | cut -d' ' -f1)
if [[ -f "$npm_stamp" && "$(cat "$npm_stamp")" == "$wanted" ]]; then
  : # already installed from this package.json and lock file
elif [[ -f package-lock.json ]]; then
  npm ci --no-audit --no-fund --loglevel=error
else
  npm install --no-audit --no-fund --loglevel=error
fi
wanted=$(cat package.json package-lock.json | sha256sum | cut -d' ' -f1)
# The conformance suite needs Node >= 22; the machine's own node may be older.
node22=$(node_modules/.bin/node --version)
[[ "$node22" == v2[2-9].* ]] || { echo "install_third_party: expected Node 22 in node_modules, got $node22" >&2; exit 1; }
echo "$wanted" >"$npm_stamp"

for entry in "${PYPI_SERVERS[@]}"; do
  name=${entry%%=*}
  reqs=${entry#*=}
  venv="$ROOT/.third_party/$name"
  stamp="$venv/.requirements"
  if [[ -x "$venv/bin/$name" && -f "$stamp" && "$(cat "$stamp")" == "$reqs" ]]; then
    continue
  fi
  rm -rf "$venv"
  "$PYTHON" -m venv "$venv"
  # shellcheck disable=SC2086 # reqs is a space-separated list on purpose
  "$venv/bin/python" -m pip install -q --disable-pip-version-check $reqs
  echo "$reqs" >"$stamp"
done
echo "install_third_party: done"
