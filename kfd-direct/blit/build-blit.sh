#!/usr/bin/env bash
# Regenerates the blit code objects the kfd-direct backend embeds, from blit.cl (needs clang-15
# and lld-15: `apt-get install clang-15 lld-15`). gfx940 stands in for gfx942, which clang-15
# does not know.
set -euo pipefail
cd "$(dirname "$0")"
for t in gfx90a gfx940 gfx1100; do
  clang-15 -x cl -cl-std=CL2.0 -target amdgcn-amd-amdhsa -mcpu="$t" -nogpulib -O2 -c blit.cl -o "blit-$t.o"
  ld.lld-15 -shared "blit-$t.o" -o "blit-$t.co"
  rm "blit-$t.o"
done
ls -l blit-*.co
