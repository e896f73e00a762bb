#!/usr/bin/env bash
# The main job: set-up, generate the `sample` lake (the data the paper's 14 questions need) if
# it is not there yet, and describe it. Extra arguments go to `oda-analyst lake generate`.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
. scripts/setup.sh

lake="${ODA_LAKE:-${ODA_DATA_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/oda-analyst}/lake}"
if [ ! -d "$lake/year_month=22-06" ] || [ "$#" -gt 0 ]; then
  oda-analyst lake generate --profile sample --out "$lake" "$@"
fi
oda-analyst lake describe --lake "$lake"
