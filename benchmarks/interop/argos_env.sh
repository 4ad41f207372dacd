#!/usr/bin/env bash
# The virtual environments of the real consumers and producers of Argos Translate packages, each
# with its own pins (never attnmt's .venv): built once, then reused.
#
#   benchmarks/interop/argos_env.sh argostranslate   # prints the path of that environment's python
#   benchmarks/interop/argos_env.sh libretranslate
#   benchmarks/interop/argos_env.sh eole             # the trainer of the third-party package (tests/interop)
#
# Where: $ATTNMT_ARGOS_ENVS (default ~/.cache/attnmt/argos-envs)/NAME-VERSION-PINS (PINS: a hash of
# the packages' pins). A finished one holds .installed and is reused at once; one being built by
# another process is waited for (flock); a failed build is removed. Needs PyPI through pip (the
# index pip is configured with). torch is pinned first to the version attnmt's Makefile uses, so
# that stanza's and eole's plain `torch` requirement finds it installed instead of downloading
# PyPI's multi-GB CUDA build.
set -euo pipefail
NAME="${1:?usage: argos_env.sh argostranslate|libretranslate|eole}"
TORCH_VERSION="${TORCH_VERSION:-2.13.0}"
PYTHON="${PYTHON:-python3}"
case "$NAME" in
    argostranslate) VERSION=1.11.0; PACKAGES=("argostranslate==$VERSION"); TORCH=1 ;;
    # lxml 6.2 drops every namespace prefix when argos-translate-files' pinned BeautifulSoup 4.9.3
    # parses XML ('<w:document>' comes back '<document>'): each .docx LibreTranslate translated
    # was unreadable to Word and python-docx (checked 2026-12-03: 6.1.3 keeps them)
    libretranslate) VERSION=1.9.6; PACKAGES=("libretranslate==$VERSION" "lxml<6.2"); TORCH=0 ;;
    eole) VERSION=0.6.4; PACKAGES=("eole==$VERSION" "aiohttp"); TORCH=1 ;;  # its CLI imports aiohttp, undeclared
    *) echo "argos_env.sh: unknown environment $NAME (argostranslate, libretranslate, eole)" >&2; exit 2 ;;
esac
ROOT="${ATTNMT_ARGOS_ENVS:-$HOME/.cache/attnmt/argos-envs}"
# keyed on the pins too, so that a changed pin builds a new environment instead of reusing the old
PINS=$(printf '%s\n' "${PACKAGES[@]}" | sha256sum | cut -c1-8)
ENV="$ROOT/$NAME-$VERSION-$PINS"
mkdir -p "$ROOT"
exec 9>"$ROOT/.$NAME-$VERSION-$PINS.lock"
flock 9
if [ ! -f "$ENV/.installed" ]; then
    rm -rf "$ENV"
    trap 'rm -rf "$ENV"' ERR
    "$PYTHON" -m venv "$ENV" >&2
    "$ENV/bin/python" -m pip install --quiet --upgrade pip >&2
    if [ "$TORCH" = 1 ]; then
        "$ENV/bin/python" -m pip install --quiet "torch==$TORCH_VERSION" >&2
    fi
    "$ENV/bin/python" -m pip install --quiet "${PACKAGES[@]}" >&2
    touch "$ENV/.installed"
    trap - ERR
fi
echo "$ENV/bin/python"
