"""`python -m bench COMMAND [ARGS ...]`: every benchmark and tuning tool of bench/, one subcommand each.

`python -m bench --help` lists them; `python -m bench COMMAND --help` gives a command's own arguments.
"""

from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS: dict[str, tuple[str, str]] = {  # command -> (module, what it does, in one line)
    "gpu-run": ("bench.gpu_run", "make solutions in shards of one GPU each, tampering, latency: one results folder"),
    "tampering": ("bench.tampering_on_gpu", "grade every tampering submission on this machine; 1 if one got through"),
    "wall-times": (
        "bench.check_wall_times",
        "wall time of `python -m checks N --solution` in a checkout, warm and not",
    ),
    "latency": ("bench.latency", "wall time of a check of every puzzle, as a learner at a terminal meets it"),
    "phases": ("bench.phases", "the time marks of CHECKS_PHASES=FILE as one table"),
    "timeline": ("bench.timeline", "run a command, each line of its output with the seconds since it started"),
    "shared-gpu": ("bench.shared_gpu", "an answer key graded alone, then several at once on one GPU: the ratios"),
    "merge-run": ("bench.merge_run", "merge a later `make bench --only ...` run into the recorded results"),
    "tune-keys": ("bench.tune_keys", "the answer keys of 4, 9 and 10 at fixed configs, beside cuBLAS and SDPA"),
    "decoding-graphs": ("bench.decoding_graphs", "the decoding keys 11-13 replayed from CUDA graphs, beside SDPA"),
    "tune-launch": ("bench.tune_launch", "the decoding keys 11-13 at other launch shapes, beside SDPA"),
    "tune-flash-decoding": ("bench.tune_flash_decoding", "puzzle 11's two kernel forms at several launch shapes"),
    "short-in-wide-table": ("bench.short_in_wide_table", "key 13 on one short sequence in a wide block table"),
    "kept-plans": ("bench.kept_plans", "each answer key's plan at its timing size, as the grader keeps it, twice"),
    "hopper": ("bench.hopper", "the Hopper track's keys (16a, 16b, 16) checked and timed beside torch, cuBLAS, cuDNN"),
    "prefill": (
        "bench.prefill",
        "the prefill keys (14, 15) beside varlen_attn, padded SDPA and gathered pages",
    ),
    "profile": (
        "bench.profile",
        "a puzzle's kernels, yours beside the key and the baseline: times, share, fraction of peak (Proton)",
    ),
    "warp-timeline": (
        "bench.warp_timeline",
        "one program of a Hopper key (16a, 16b, 16): which warp does which phase when (Proton's scopes), a PNG",
    ),
    "records": ("bench.records", "the runs' records (record.json): list, show, compare two, back-fill a folder's"),
}


def parser() -> argparse.ArgumentParser:
    """The command line: one subcommand per tool, its arguments left to the tool's own parser."""
    top = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    commands = top.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (_, what) in COMMANDS.items():
        commands.add_parser(name, help=what, description=what, add_help=False)
    return top


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in COMMANDS:  # the rest, --help included, is the tool's
        return importlib.import_module(COMMANDS[args[0]][0]).main(args[1:])
    parser().parse_args(args)  # --help, or an unknown command: argparse says so and exits
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
