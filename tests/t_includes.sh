#!/usr/bin/env bash
# Include arrows point down (docs/ARCHITECTURE.md): each folder may include only the folders below it.
#   util <- model <- cpu, cuda (the backends: model/backend.h only) ; util <- data ; model <- io
#   train: model io data util ; eval: data util ; infer: model io data eval util ; gdn.c, tests/: anything
# Fails listing every forbidden include; then checks that the checker catches an injected one.
set -euo pipefail
cd "$(dirname "$0")/.."

declare -A ALLOW=(
  [util]="util"
  [model]="model util"
  [cpu]="cpu model/backend.h util"
  [cuda]="cuda model/backend.h util"
  [data]="data util"
  [io]="io model util"
  [train]="train model io data util"
  [eval]="eval data util"
  [infer]="infer model io data eval util"
)
# Pending, owned by the distributed helper (issue 19, branch i19-dist): NCCL moves into the backend table
# and train/dist_cuda.h goes away. Remove this line when that merges.
EXCEPT="cuda/collective.cu:train/dist_cuda.h"

check_tree() { # root: prints one line per forbidden include, returns 1 if any
  local root=$1 bad=0 f dir inc target top ok a
  for dir in "${!ALLOW[@]}"; do
    [ -d "$root/$dir" ] || continue
    while IFS= read -r f; do
      while IFS= read -r inc; do
        case "$inc" in
          */*) target=${inc#../}; while [[ $target == ../* ]]; do target=${target#../}; done ;;
          *) target="$dir/$inc" ;;
        esac
        top=${target%%/*}
        ok=0
        for a in ${ALLOW[$dir]}; do
          if [[ $a == */* ]]; then [ "$target" = "$a" ] && ok=1; else [ "$top" = "$a" ] && ok=1; fi
        done
        [ "$ok" = 1 ] && continue
        [[ " $EXCEPT " == *" ${f#$root/}:$target "* ]] && continue
        echo "forbidden include: ${f#$root/} includes \"$inc\" ($dir/ may include: ${ALLOW[$dir]})"
        bad=1
      done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
    done < <(find "$root/$dir" -maxdepth 1 -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) | sort)
  done
  return $bad
}

if ! check_tree .; then echo "t_includes: forbidden includes found"; exit 1; fi
n=$(find "${!ALLOW[@]}" -maxdepth 1 -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) | wc -l)
echo "t_includes: $n files in ${#ALLOW[@]} folders, every include points down (1 pending exception: $EXCEPT)"

# The checker itself: a copy of model/ with a forbidden include must fail, naming the file.
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/model" && cp model/*.h model/*.c "$tmp/model/"
printf '#include "../cpu/cpu_ops.h"\n' >> "$tmp/model/params.c"
if out=$(check_tree "$tmp"); then echo "t_includes: an injected model/ -> cpu/ include was not caught"; exit 1; fi
grep -q 'model/params.c includes "../cpu/cpu_ops.h"' <<< "$out" || { echo "t_includes: wrong report: $out"; exit 1; }
echo "t_includes: an injected model/params.c -> cpu/ include is caught"
