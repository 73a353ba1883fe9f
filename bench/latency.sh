#!/usr/bin/env bash
# Wall time of `python -m checks N --solution` for every puzzle, twice in a row (the second run has a
# warm Triton compile cache and the cached roofline): the feedback a learner waits for on a GPU.
set -u
printf "| puzzle | first run (s) | second run (s) | verdict |\n|---|---|---|---|\n"
for p in $(python3 -c "from checks.registry import load_puzzles; print(' '.join(p.number for p in load_puzzles()))"); do
    first=$( { /usr/bin/time -f "%e" python3 -m checks "$p" --solution > /dev/null 2>/dev/null; } 2>&1 | tail -1)
    start=$(date +%s.%N)
    verdict=$(python3 -m checks "$p" --solution 2>&1 | grep -E "^(PASSED|FAILED|NOT GRADED)" | cut -c1-6)
    second=$(echo "$(date +%s.%N) - $start" | bc)
    printf "| %s | %s | %.1f | %s |\n" "$p" "$first" "$second" "$verdict"
done
