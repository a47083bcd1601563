#!/usr/bin/env bash
# Builds libamdhip64.so.5 from libaqueduct_hip.a: aqueduct's HIP library under HIP's soname,
# with each function in the symbol-version node Debian's libamdhip64 5.2.3 puts it in
# (libamdhip64-5.2.3.versions). A program linked against Debian's library records those
# versioned references, so it runs on aqueduct unmodified with this file first on
# LD_LIBRARY_PATH. Functions Debian's library does not have go in node AQUEDUCT_0.1.
#
# Usage: build-libamdhip64.sh DIR   (DIR holds libaqueduct_hip.a and libaqueduct_hip.so, as
# `cargo build -p aqueduct-hip` leaves them in target/<profile>); writes DIR/amdhip64/libamdhip64.so.5.
# Needs gcc and binutils (readelf, objcopy).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=$(cd "$1" && pwd)
versions="$here/libamdhip64-5.2.3.versions"
out="$dir/amdhip64"
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# What aqueduct exports: the cdylib's defined dynamic symbols.
nm -D --defined-only "$dir/libaqueduct_hip.so" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' | sort -u >"$work/exports"
grep -v '^#' "$versions" | awk '{print $2}' | sort -u >"$work/debian"

{
  previous=""
  for node in hip_4.2 hip_4.3 hip_4.4 hip_4.5 hip_5.0 hip_5.1 hip_5.2; do
    grep "^$node " "$versions" | awk '{print $2}' | sort -u | comm -12 - "$work/exports" >"$work/node"
    echo "$node {"
    if [ -s "$work/node" ]; then
      echo "  global:"
      sed 's/.*/    &;/' "$work/node"
    fi
    if [ -z "$previous" ]; then
      echo "  local: *;"
      echo "};"
    else
      echo "} $previous;"
    fi
    previous=$node
  done
  comm -23 "$work/exports" "$work/debian" >"$work/extra"
  if [ -s "$work/extra" ]; then
    echo "AQUEDUCT_0.1 {"
    echo "  global:"
    sed 's/.*/    &;/' "$work/extra"
    echo "} $previous;"
  fi
} >"$work/libamdhip64.map"

# Rust's compiler_builtins, inside the archive, carries weak hidden copies of compiler runtime
# helpers aqueduct exports as Debian's library does (__gnu_f2h_ieee, __gnu_h2f_ieee). Linked
# whole, the hidden copy would hide aqueduct's (the most constraining visibility wins), so those
# copies are renamed out of the way in a copy of the archive.
cp "$dir/libaqueduct_hip.a" "$work/libaqueduct_hip.a"
mkdir "$work/cb"
(
  cd "$work/cb"
  members=$(ar t "$work/libaqueduct_hip.a" | grep '^compiler_builtins' || true)
  [ -n "$members" ] || exit 0
  # shellcheck disable=SC2086 # one word per member name
  ar x "$work/libaqueduct_hip.a" $members
  changed=""
  for m in $members; do
    renames=""
    for sym in $(readelf -sW "$m" | awk '$5 == "WEAK" && $7 != "UND" {print $8}' | sort -u | comm -12 - "$work/exports"); do
      renames="$renames --redefine-sym $sym=__aqueduct_cb_$sym"
    done
    if [ -n "$renames" ]; then
      # shellcheck disable=SC2086 # one option per word
      objcopy $renames "$m"
      changed="$changed $m"
    fi
  done
  [ -n "$changed" ] || exit 0
  # ar reads every member to rebuild the index, and binutils' LLVM plugin complains (on
  # standard output) about Rust's newer bitcode, which the index does not need: only its
  # other messages are shown.
  # shellcheck disable=SC2086 # one word per member name
  if ! ar r "$work/libaqueduct_hip.a" $changed >"$work/ar.out" 2>&1; then
    cat "$work/ar.out" >&2
    exit 1
  fi
  grep -v '^bfd plugin: ' "$work/ar.out" >&2 || true
)

gcc -shared -o "$out/libamdhip64.so.5.tmp" \
  -Wl,-soname,libamdhip64.so.5 -Wl,--version-script="$work/libamdhip64.map" \
  -Wl,--whole-archive "$work/libaqueduct_hip.a" -Wl,--no-whole-archive \
  -lpthread -ldl -lm -lrt -lgcc_s
mv "$out/libamdhip64.so.5.tmp" "$out/libamdhip64.so.5"
echo "$out/libamdhip64.so.5"
