#!/usr/bin/env bash
# The main job: set-up, the `sample` lake (the data the paper's 14 questions need; generated once,
# ~2 minutes), then a question answered end to end with no model:
#   scripts/main.sh                      # the paper's Q3, as a demonstration
#   scripts/main.sh "QUESTION" [--json]  # any question; extra options go to `oda-analyst ask`
#   ODA_LAKE=DIR|s3://B/P scripts/main.sh "QUESTION"   # your own lake, read as it is
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
. scripts/setup.sh

# Your own lake (ODA_LAKE: a folder or s3://bucket/prefix) is read as it is; only the default
# folder is filled with the generated sample lake, never a lake you named.
if [ -z "${ODA_LAKE:-}" ]; then
  data="${ODA_DATA_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/oda-analyst}"
  export ODA_LAKE="$data/lake"
  if [ ! -f "$ODA_LAKE/.oda-sample-complete" ]; then
    oda-analyst lake generate --profile sample --out "$ODA_LAKE"
    touch "$ODA_LAKE/.oda-sample-complete"
    oda-analyst lake describe --lake "$ODA_LAKE" | head -n 14
  fi
fi

question="${1:-Retrieve GPU-0 utilisation for nodes 900 and 920 on 1 June 2022 from 08:00 to 15:00}"
shift || true
status=0
oda-analyst ask "$question" "$@" || status=$?
# 3 = the analyst asks a clarification (answer with `oda-analyst clarify ID ANSWER`): not a failure
if [ "$status" -ne 0 ] && [ "$status" -ne 3 ]; then exit "$status"; fi
