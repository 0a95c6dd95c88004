#!/usr/bin/env bash
# Installs what the VS Code UI tests need, offline-friendly (see /work/shared/notes/vscode-e2e.md):
# Debian's Chromium and ripgrep (+ the headers code-server's native modules build against), and
# code-server 4.100.3 from npm into tests/e2e/.cache/code-server, with @vscode/ripgrep's GitHub download
# replaced by a tarball of Debian's rg. Idempotent: a stamp file skips the npm install next time.
# Fails loudly (non-zero exit) when something cannot be installed; it never skips.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CACHE="${DISTCHECK_E2E_CACHE:-$ROOT/tests/e2e/.cache}"
CODE_SERVER_VERSION="4.100.3"
RIPGREP_VERSION="1.15.11"          # @vscode/ripgrep pinned by code-server's shrinkwrap
RIPGREP_ASSET="ripgrep-v13.0.0-10-x86_64-unknown-linux-musl.tar.gz"
DEB_PACKAGES=(chromium ripgrep build-essential pkg-config libkrb5-dev libx11-dev libxkbfile-dev libsecret-1-dev)

say() { printf '[e2e setup] %s\n' "$*"; }
die() { printf '[e2e setup] ERROR: %s\n' "$*" >&2; exit 1; }

# ---- Debian packages
missing=()
for pkg in "${DEB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  command -v apt-get >/dev/null || die "missing Debian packages (${missing[*]}) and no apt-get on this machine"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || die "missing Debian packages (${missing[*]}); run as root or install them"
    SUDO="sudo"
  fi
  say "apt-get install ${missing[*]}"
  t0=$SECONDS
  $SUDO apt-get update -qq || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || die "apt-get install ${missing[*]} failed"
  say "apt-get took $((SECONDS - t0)) s"
fi
[ -x /usr/bin/chromium ] || die "/usr/bin/chromium is missing after installing the chromium package"
command -v rg >/dev/null || die "rg (ripgrep) is missing after installing the ripgrep package"

# ---- code-server
CS_DIR="$CACHE/code-server"
STAMP="$CS_DIR/.installed-$CODE_SERVER_VERSION"
if [ -f "$STAMP" ] && [ -x "$CS_DIR/node_modules/.bin/code-server" ]; then
  say "code-server $CODE_SERVER_VERSION already installed in $CS_DIR"
  exit 0
fi
command -v npm >/dev/null || die "npm is missing"
node_major="$(node -p 'process.versions.node.split(".")[0]')"
[ "$node_major" -ge 20 ] || die "code-server $CODE_SERVER_VERSION needs Node 20 (found $(node --version))"

rm -rf "$CS_DIR"
mkdir -p "$CS_DIR"
TMP_SEED="$(mktemp -d)"
trap 'rm -rf "$TMP_SEED"' EXIT
# @vscode/ripgrep's postinstall looks in $TMPDIR/vscode-ripgrep-cache-<version>/ before downloading.
mkdir -p "$TMP_SEED/vscode-ripgrep-cache-$RIPGREP_VERSION" "$TMP_SEED/rg"
cp "$(command -v rg)" "$TMP_SEED/rg/rg"
tar -C "$TMP_SEED/rg" -czf "$TMP_SEED/vscode-ripgrep-cache-$RIPGREP_VERSION/$RIPGREP_ASSET" rg

cat >"$CS_DIR/package.json" <<JSON
{
  "name": "distcheck-e2e-code-server",
  "private": true,
  "description": "code-server for distcheck's UI tests (installed by tests/e2e/setup.sh)",
  "dependencies": { "code-server": "$CODE_SERVER_VERSION" }
}
JSON

say "npm install code-server@$CODE_SERVER_VERSION (takes a couple of minutes)"
t0=$SECONDS
# unsafe_perm: code-server's postinstall refuses root without it; yes: node-pty runs `npx node-gyp`
# without a TTY; dangerously_allow_all_scripts: npm >= 11.1x blocks dependency install scripts by
# default, and code-server's native modules (argon2, node-pty, kerberos, ripgrep) need theirs.
(
  cd "$CS_DIR"
  TMPDIR="$TMP_SEED" npm_config_unsafe_perm=true npm_config_yes=true npm_config_dangerously_allow_all_scripts=true \
    npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false \
    npm install --no-save --loglevel=error >"$CS_DIR/npm-install.log" 2>&1
) || { tail -n 60 "$CS_DIR/npm-install.log" >&2; die "npm install code-server@$CODE_SERVER_VERSION failed (log: $CS_DIR/npm-install.log)"; }
say "npm install took $((SECONDS - t0)) s"

[ -x "$CS_DIR/node_modules/.bin/code-server" ] || die "code-server binary missing after npm install"
"$CS_DIR/node_modules/.bin/code-server" --version >/dev/null 2>&1 || die "code-server --version fails"
[ -x "$CS_DIR/node_modules/@vscode/ripgrep/bin/rg" ] || find "$CS_DIR/node_modules" -path '*ripgrep/bin/rg' | grep -q . \
  || die "code-server's ripgrep is missing"
touch "$STAMP"
say "code-server $("$CS_DIR/node_modules/.bin/code-server" --version | head -1) ready"
