"""Shared helpers: the registry's puzzles and their known-wrong kernels, as pytest parameters."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

# Without a GPU, Triton must be in interpreter mode before anything imports it: tests that run
# kernels in-process (the watchers, the recorder) would otherwise meet compiled kernels they cannot run.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from checks.authoring.wrong import known_wrong, name_of
from checks.registry import ROOT, Puzzle, load_puzzles

READY = [p for p in load_puzzles() if p.ready]


def wrong_kernels() -> list[tuple[Puzzle, Path]]:
    return [(p, f) for p in READY for f in known_wrong(p)]


@pytest.fixture(scope="session")
def machine_mode() -> str:
    """How this machine grades: "gpu" with a CUDA GPU, else "interpreter"."""
    import torch

    return "gpu" if torch.cuda.is_available() else "interpreter"


# Tests that grade in a grading process, run notebooks, or record kernels in the interpreter: seconds
# each. `make test-fast` (pytest -m "not slow") leaves them out; `make test` runs everything.
SLOW_MODULES = {"test_notebooks", "test_classroom", "test_html", "test_answer_key", "test_integrity_slow"}
SLOW_TESTS = {
    "test_right_answers_in_other_styles_pass", "test_broken_submissions_get_a_verdict_not_a_traceback",
    "test_python_m_checks_exits_with_the_verdicts_status",
    "test_a_split_interpreter_stage_grades_every_case_and_fails_what_one_process_would",
    "test_cli_exit_codes", "test_a_lettered_step_is_graded_by_its_id", "test_watcher_flags_torch_arithmetic",
    "test_right_answers_run_no_torch", "test_known_wrong_token_kernels_are_caught_by_the_rule",
    "test_token_kernel_plus_torch_answer_is_flagged",
    "test_the_cli_says_when_it_records_a_file_that_is_not_the_notebook",
    "test_the_terminal_saves_the_picture_with_picture_path", "test_a_terminal_failure_says_how_to_get_the_picture",
    "test_a_failing_notebook_check_saves_the_picture_beside_the_notebook", "test_a_failing_case_saves_its_error_map",
    "test_the_picture_is_drawn_with_the_unwritten_tail_in_red", "test_a_notebook_check_takes_a_seed",
    "test_matmul_fast_answer_key_passes_and_row_major_order_fails",
    "test_flash_attention_2_forward_skips_causal_blocks",
    "test_flash_attention_2_backward_skips_causal_blocks_and_never_stores_p", "test_this_machine_is_healthy",
    "test_a_hanging_kernel_is_cut_off", "test_write_outputs_puts_everything_under_out", "test_smoke_run_end_to_end",
    "test_render_redraws_the_recorded_run", "test_plots_are_pngs", "test_recording_example",
    "test_a_variant_passes_the_grader_or_breaks_only_a_method_rule",
    "test_what_a_case_printed_is_shown_under_that_case_and_the_nan_warning_is_explained",
    "test_maps_draw_each_kind_of_puzzle", "test_map_command_records_in_a_child_and_writes_a_png",
    "test_loads_and_stores_are_counted_per_element_and_program", "test_a_prestarted_grading_process_is_taken_over",
    "test_a_write_past_the_end_is_pictured_in_the_terminal",
    "test_a_notebook_check_that_breaks_a_rule_on_memory_accesses_draws_the_access_map",
    "test_a_known_wrong_kernel_can_be_graded_up_to_its_first_failure",
    "test_a_notebook_given_by_a_relative_path_is_graded",
    "test_the_warm_grader_grades_as_a_fresh_process_does",
    "test_a_check_whose_terminal_went_away_is_stopped_and_the_next_one_is_served",
    "test_a_grader_for_other_settings_retires_the_old_one_and_a_stopped_one_cleans_up",
    "test_a_spare_is_taken_by_a_check_of_its_mode_and_dropped_by_another",
    "test_stop_all_stops_every_grading_process_started_here",
    "test_a_prestarted_process_whose_grader_left_ends_quietly",
    "test_a_notebook_check_starts_the_next_checks_grading_processes",
}  # fmt: skip


def pytest_collection_modifyitems(config, items) -> None:
    """Mark the slow tests; `gpu` tests need a CUDA GPU; `interpreter` tests assert what only a CPU-only run shows."""
    import torch

    gpu = torch.cuda.is_available()
    for item in items:
        if item.module.__name__.rsplit(".", 1)[-1] in SLOW_MODULES or item.originalname in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)
        if "gpu" in item.keywords and not gpu:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))
        if "interpreter" in item.keywords and gpu:
            item.add_marker(pytest.mark.skip(reason="asserts a CPU-only run; this machine grades on its GPU"))


def puzzle_params() -> list:
    return [pytest.param(p, id=p.stem) for p in READY]


def wrong_params() -> list:
    return [pytest.param(p, f, id=f"{p.stem}/{name_of(f)}") for p, f in wrong_kernels()]


def right_submissions() -> list[tuple[str, Path]]:
    """Each right submission in another style, with the puzzle its name starts with (`10a_x.py` is 10a)."""
    import re

    paths = sorted((ROOT / "tests" / "submissions" / "right").glob("*.py"))
    return [(re.match(r"\d+[a-z]?", p.name).group(), p) for p in paths]
