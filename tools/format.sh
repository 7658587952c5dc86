#!/usr/bin/env bash
# Formats every C++ and Python file the way CI checks them (clang-format, ruff).
set -euo pipefail
cd "$(dirname "$0")/.."
git ls-files --cached --others --exclude-standard '*.cpp' '*.h' | xargs clang-format -i
python3 -m ruff check --fix --quiet .
python3 -m ruff format --quiet .
