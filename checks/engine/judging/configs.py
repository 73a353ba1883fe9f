"""Every config an autotuned kernel runs on a GPU is the one the interpreter judges.

Triton's interpreter cannot time an autotuner's configs, and a config may change the method (a constexpr that picks
the launch order, the number of passes, whether a tile is skipped), not only the tile sizes. So:

- beside a GPU stage, the GPU stage reports the config each autotuned launch ran (`Stage.configs_run`), and each
  config it ran that the interpreter stage did not is judged in the interpreter once more (`on_the_gpus_configs`:
  the interpreter replays, for that kernel, the alternative with those values);
- with no GPU stage (a machine without a GPU), the interpreter judges every config of an autotuned launch that
  differs from the others in its grid or its arguments (`every_config`): whatever a GPU would choose has then been
  judged. Configs that differ only in launch settings (num_warps, num_stages) run alike in the interpreter and count
  as one; configs that differ in a block size count as two, since a block size is a constexpr like any other that a
  kernel can branch on. At most CONFIG_LIMIT are judged (every answer key tunes one config in the interpreter): a
  launch with more fails (`too_many_configs`), since a GPU may choose one that was never judged.

A config judged after the first runs every case again in grading processes of its own; the verdict names the config
of the first that fails.

A method is judged on a case large enough for the config's tiles to show it. A puzzle's interpreter cases are made
for tiles up to a size (64 rows for the launch order of 4 and the causal skipping of 9 and 10); a config whose
largest block size (`tile_of`: its largest power of two of 16 or more) is larger is judged once more on the
puzzle's method cases sized from it (`method_cases(tile)` of its module in checks.puzzles: 4's wide and tall grids
of at least 2 x 16 tiles, a causal case of 9 and 10 with two key blocks past the first diagonal), added after the
puzzle's own cases (checks.registry.with_method_cases), with that config chosen.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from checks import verdict as V
from checks.engine.judging.rules import rulebook
from checks.engine.judging.stage import Stage
from checks.engine.judging.wording import MAP_ADVICE_START
from checks.registry import with_method_cases

CONFIG_LIMIT = 8  # distinct configs of one autotuned launch judged in the interpreter alone (the first included)


def every_config(stage: Stage, verdict: V.Verdict, limit: float) -> V.Verdict:
    """The interpreter stage's verdict (with no GPU stage), once every distinct config of its autotuned launches is
    judged, each on the puzzle's method cases too where its tiles are larger than its own cases are made for: the
    first config's verdict stands when it failed; else the first other config that fails, named."""
    if not verdict.passed:
        return verdict
    if stage.alternatives > CONFIG_LIMIT:
        return too_many(verdict, stage.alternatives)
    count = stage.alternatives
    ran = list(stage.configs_run)  # the configs each alternative's replay ran
    for alternative in range(1, count):
        job = replace(stage.job, alternative=alternative)
        other, configs = rerun(stage, job, stage.workdir / f"config-{alternative}", limit, again=True)
        if not other.passed:  # named: the configs this alternative ran that the first did not
            return config_failed(other, [c for c in configs if c not in stage.configs_run] or configs, count)
        ran += [config for config in configs if config not in ran]
    failed = on_method_cases(stage, stage.job, ran, limit)
    if failed is not None:
        return failed
    if count > 1:
        verdict.details.append(
            f"Your autotuned kernels were judged with each of their {count} configs that differ in their arguments: "
            "a GPU may choose any of them."
        )
    return verdict


def too_many(verdict: V.Verdict, count: int) -> V.Verdict:
    """A passing first config's verdict turned into a failure: more configs than the interpreter judges, so the one a
    GPU would choose may never have been judged."""
    verdict.status = V.FAILED
    verdict.rule = rulebook.outcome("too_many_configs")
    verdict.summary = (
        f"Your autotuned kernels have {count} configs that differ in their arguments, and a GPU may choose any of "
        f"them; on a machine without a GPU the grader judges each one, at most {CONFIG_LIMIT}, so the others were "
        f"never judged. Keep at most {CONFIG_LIMIT} configs whose block sizes or other constexprs differ (configs "
        "that differ only in num_warps or num_stages count as one here), then run the check again."
    )
    verdict.details = [line for line in verdict.details if not line.startswith(MAP_ADVICE_START)]
    verdict.map_case = None
    return verdict


def tile_of(config: dict[str, Any]) -> int:
    """A config's largest block size: its largest value that is a power of two of 16 or more (0: none). Named by
    value, not by name: a kernel's block sizes are named as the learner likes."""
    sizes = [
        v for v in config.values() if isinstance(v, int) and not isinstance(v, bool) and v >= 16 and not v & (v - 1)
    ]
    return max(sizes, default=0)


def on_method_cases(stage: Stage, base: Any, ran: list[dict[str, Any]], limit: float) -> V.Verdict | None:
    """Judge each config in `ran` whose tiles are larger than the puzzle's interpreter cases are made for on the
    puzzle's method cases sized from them (recorded and replayed in the interpreter, that config chosen): the first
    verdict that fails, its config named; None when each passed (or none needed them)."""
    from checks.puzzles import spec_module

    sized = getattr(spec_module(stage.puzzle), "method_cases", None)
    if sized is None:
        return None
    first = len(stage.puzzle.cases.cpu)
    for index, config in enumerate(ran):
        extra = sized(tile_of(config["config"]))
        if not extra:
            continue
        job = replace(
            base, interpret=True, cases=list(range(first, first + len(extra))), method_cases=extra, alternative=0,
            chosen={config["kernel"]: config["config"]},
        )  # fmt: skip
        puzzle = with_method_cases(stage.puzzle, extra)
        verdict, judged = rerun(stage, job, stage.workdir / f"method-cases-{index}", limit, puzzle=puzzle)
        if not verdict.passed and verdict.status not in rulebook.INTERPRETER_STAGE_EXCUSED:
            return config_failed(verdict, judged or [config], -1)
    return None


def chosen_sets(gpu: Stage, judged: list[dict[str, Any]]) -> list[dict[str, dict[str, Any]]]:
    """The configs the GPU stage ran that the interpreter did not (`judged`), as `Job.chosen` maps, each kernel's
    configs spread over as few maps as can hold them."""
    missing: dict[str, list[dict[str, Any]]] = {}
    for ran in gpu.configs_run:
        if ran not in judged:
            missing.setdefault(ran["kernel"], []).append(ran["config"])
    count = max((len(configs) for configs in missing.values()), default=0)
    return [{kernel: configs[min(i, len(configs) - 1)] for kernel, configs in missing.items()} for i in range(count)]


def on_the_gpus_configs(
    gpu: Stage, parts: list[Stage], limit: float, cases: list[int] | None = None
) -> V.Verdict | None:
    """Judge in the interpreter each config the GPU stage ran that the interpreter stage's parts did not (on the
    interpreter `cases`, None: all): the first verdict that fails, with its config named; None when every one passed
    (or there was none to judge)."""
    judged = [ran for part in parts for ran in part.configs_run]
    for index, chosen in enumerate(chosen_sets(gpu, judged)):
        job = replace(gpu.job, interpret=True, record_on_gpu=True, cases=cases, chosen=chosen)
        verdict, ran = rerun(gpu, job, gpu.workdir / f"gpu-config-{index}", limit)
        if not verdict.passed and verdict.status not in rulebook.INTERPRETER_STAGE_EXCUSED:
            return config_failed(verdict, ran, 0)
    # the configs the GPU ran whose tiles are too large for the interpreter's own cases: on cases sized from them
    # (those the parts ran were judged there beside the GPU stage: checks.engine.grade.with_interpreter_stage)
    others = [config for config in gpu.configs_run if config not in judged]
    return on_method_cases(gpu, replace(gpu.job, record_on_gpu=True), others, limit)


def rerun(
    stage: Stage, job: Any, folder: Path, limit: float, again: bool = False, puzzle: Any = None
) -> tuple[V.Verdict, list[dict[str, Any]]]:
    """The submission graded again in the interpreter with another choice of configs, in processes of its own: the
    verdict, and the configs its autotuned launches ran. `again`: replay the plans `stage` recorded (the same cases,
    recorded for the interpreter), rather than record them anew; `puzzle`: the puzzle with the job's method cases."""
    folder.mkdir(exist_ok=True)
    puzzle = puzzle or stage.puzzle
    other = Stage(puzzle, job, "interpreter", folder, first_failure=stage.first_failure, file=stage.file)
    other.stops_with(stage)  # a part cancelled when the GPU stage fails stops its further judgings too
    verdict = other.replay_again(stage, limit) if again and stage.recorded_as else other.run(limit)
    return verdict, other.configs_run


def config_failed(verdict: V.Verdict, ran: list[dict[str, Any]], count: int) -> V.Verdict:
    """A verdict of a config judged after the first, its summary naming the configs that ran (`count`: how many
    distinct configs were judged in turn; 0: the config the GPU chose)."""
    named = "; ".join(f"`{r['kernel']}` with {shown(r['config'])}" for r in ran) or "another config"
    if count > 0:
        why = f"one of the {count} configs of your autotuner that differ in their arguments, each judged since a GPU "
        why += "may choose any"
    elif count == 0:
        why = "the config the GPU chose"
    else:
        why = "on a case sized from its tiles, which the puzzle's own cases are too small for"
    verdict.summary = f"With {named} ({why}): {verdict.summary}"
    # an access map is drawn from the first config on the puzzle's own cases: it would not show this failure
    verdict.map_case = None
    verdict.details = [line for line in verdict.details if not line.startswith(MAP_ADVICE_START)]
    verdict.details.insert(
        0, "Every config your autotuner may run must compute the same method: the grader judges the one that runs."
    )
    return verdict


def shown(config: dict[str, Any]) -> str:
    return ", ".join(f"{name}={value}" for name, value in config.items()) or "its defaults"
