#!/usr/bin/env bash
# Regenerates demo-<target>.co from demo.cl and trace-<target>.co from trace.cl
# (apt-get install clang-15 lld-15).
set -euo pipefail
cd "$(dirname "$0")"
for src in demo trace; do
  for t in gfx90a gfx940 gfx1100; do
    clang-15 -x cl -cl-std=CL2.0 -target amdgcn-amd-amdhsa -mcpu="$t" -nogpulib -O2 -c "$src.cl" -o "$src-$t.o"
    ld.lld-15 -shared "$src-$t.o" -o "$src-$t.co"
    rm "$src-$t.o"
  done
done
ls -l demo-*.co trace-*.co
