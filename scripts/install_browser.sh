#!/usr/bin/env bash
# The browser tests' tools: Playwright from PyPI (the `browser` extra, into the given Python's
# environment) and Chromium from Debian's packages. `playwright install` downloads its own
# browsers and is not used: the tests launch /usr/bin/chromium (executable_path).
# Chromium needs root (apt-get); elsewhere the browser tests say how to install it and skip.
set -euo pipefail
python="${1:?usage: install_browser.sh PYTHON}"
"$python" -m pip install -q -e '.[browser]'
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q chromium || { apt-get update -q && apt-get install -y -q chromium; }
else
  echo "setup-browser: Chromium is missing and only root can install it here (apt-get install chromium): the browser tests will be skipped" >&2
fi
