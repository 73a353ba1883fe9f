"""How far the answer keys of the attention puzzles land from the reference on their large-score CPU case.

`python bench/large_score_tolerance.py [DRAWS]` (Triton's interpreter, CPU): for each puzzle with a `score_std`
case among its CPU cases, the answer key on DRAWS (default 60) fresh draws of that case; per output, the four
largest values of max |yours - expected| / (atol + rtol * |expected|) over the draws, with the puzzle's tolerance
and with the case's own (its `atol`/`rtol`, where it has them). Above 1 the grader would call the key wrong.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from checks.engine.submission import load_module
from checks.memory import Arena
from checks.puzzles import spec_module
from checks.registry import load_puzzles


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    draws = int(args[0]) if args else 60
    for puzzle in load_puzzles():
        large = [i for i, c in enumerate(puzzle.cases["cpu"]) if c.get("score_std")]
        if not large:
            continue
        case, spec = puzzle.cases["cpu"][large[0]], spec_module(puzzle)
        key = getattr(load_module(puzzle.solution, f"key_{puzzle.label}"), puzzle.name)
        worst: dict[str, list[tuple[float, float]]] = {}
        for draw in range(draws):
            generator = torch.Generator()
            generator.manual_seed(5000 + draw)
            inputs = spec.make_inputs(case, Arena("cpu", generator))
            returned = key(*inputs.values())
            for expected, got in zip(spec.reference(inputs), returned if isinstance(returned, tuple) else [returned],
                                     strict=True):  # fmt: skip
                atol, rtol = puzzle.tolerance_for(expected.name)
                case_atol, case_rtol = max(atol, case.get("atol", 0.0)), max(rtol, case.get("rtol", 0.0))
                ref = expected.value.double()
                error = (got.double() - ref).abs()
                worst.setdefault(expected.name, []).append(
                    (
                        float((error / (atol + rtol * ref.abs())).max()),
                        float((error / (case_atol + case_rtol * ref.abs())).max()),
                    )
                )
        for name, ratios in worst.items():
            puzzle_side = sorted((r for r, _ in ratios), reverse=True)[:4]
            case_side = sorted((r for _, r in ratios), reverse=True)[:4]
            print(f"{puzzle.number:>3} case {large[0] + 1} {name:>4}: puzzle's tolerance "
                  f"{' '.join(f'{r:.2f}' for r in puzzle_side)}; the case's {' '.join(f'{r:.2f}' for r in case_side)}",
                  flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
