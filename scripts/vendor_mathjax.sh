#!/usr/bin/env bash
# Vendor MathJax (pinned, from npm) into _vendor/static/mathjax, which the book's Sphinx extension
# (_ext/booksite.py) adds to the site's static files, so math renders with no network. Idempotent:
# does nothing when the pinned version is already there. Called by setup.sh and the GitHub workflow.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

MATHJAX_VERSION=3.2.2   # also named in _config.yml's mathjax_path comment
target=_vendor/static/mathjax
if [ "$(cat _vendor/mathjax.version 2>/dev/null)" = "$MATHJAX_VERSION" ] && [ -f "$target/tex-mml-chtml.js" ]; then
  exit 0
fi
if ! command -v npm >/dev/null; then
  echo "== installing Debian's npm (to fetch MathJax)"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq npm >/dev/null
fi
echo "== vendoring MathJax $MATHJAX_VERSION from npm into $target"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
npm install --silent --no-save --no-audit --no-fund --prefix "$tmp" "mathjax@$MATHJAX_VERSION"
rm -rf "$target" && mkdir -p "$(dirname "$target")"
cp -r "$tmp/node_modules/mathjax/es5" "$target"
cp "$tmp/node_modules/mathjax/LICENSE" "$target/LICENSE"
echo "$MATHJAX_VERSION" > _vendor/mathjax.version
