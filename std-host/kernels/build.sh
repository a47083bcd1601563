#!/usr/bin/env bash
# Regenerates demo-<target>.co from demo.cl (apt-get install clang-15 lld-15).
set -euo pipefail
cd "$(dirname "$0")"
for t in gfx90a gfx940 gfx1100; do
  clang-15 -x cl -cl-std=CL2.0 -target amdgcn-amd-amdhsa -mcpu="$t" -nogpulib -O2 -c demo.cl -o "demo-$t.o"
  ld.lld-15 -shared "demo-$t.o" -o "demo-$t.co"
  rm "demo-$t.o"
done
ls -l demo-*.co
