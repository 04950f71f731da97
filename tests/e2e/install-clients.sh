#!/usr/bin/env bash
# Installs the real agent CLIs the end-to-end tests drive into target/e2e/ (a cache inside
# the build tree: a second run with the same versions does nothing). Needs Node.js and npm.
set -euo pipefail
cd "$(dirname "$0")/../.."
CLAUDE_CODE_VERSION=2.1.332

install() { # install <dir> <package@version> <file that proves it is there>
    local dir=target/e2e/$1
    if [ -e "$dir/$3" ] && [ "$(cat "$dir/.installed" 2>/dev/null)" = "$2" ]; then
        return
    fi
    echo "installing $2 into $dir"
    rm -rf "$dir" && mkdir -p "$dir"
    (cd "$dir" && echo '{"private":true}' > package.json &&
        npm install --no-audit --no-fund --loglevel=error "$2")
    [ -e "$dir/$3" ] || { echo "$2 installed without $3" >&2; exit 1; }
    echo "$2" > "$dir/.installed"
}

command -v npm >/dev/null || { echo "npm not found: install Node.js to run the e2e tests" >&2; exit 1; }
install claude-code "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION" \
    node_modules/@anthropic-ai/claude-code-linux-x64/claude
