#!/bin/bash
# Grade every tampering submission of tests/submissions/tampering on this machine (a GPU one), four at a
# time, and print each one's status and summary: python3 must say "tampered" or "failed", never "passed".
cd "$(dirname "$0")/.."
grade() {
  local file=$1 puzzle=1
  case $(basename "$file") in softmax_*) puzzle=5 ;; esac
  python3 -m checks "$puzzle" --file "$file" --json 2>/dev/null |
    python3 -c "import json,sys; v=json.load(sys.stdin); print(f\"$(basename "$file"): {v['status']}: {v['summary'][:160]}\")"
}
export -f grade
ls tests/submissions/tampering/*.py | xargs -P 4 -I{} bash -c 'grade {}'
