"""The one list of rules, in the order they are checked, and the function that applies them to a call.

Every puzzle applies `EVERY_CALL`; a puzzle applies a rule of `ON_REQUEST` when its `rules:`
entry in puzzles.yaml names it, with the entry's parameters. `AFTER_ALL_CASES` runs once, on the
kernels-switched-off re-run of the first case. Adding a rule is one function and one line here.
"""

from __future__ import annotations

from checks.engine.rules import core as core_rules
from checks.engine.rules import launch_order as order_rule
from checks.engine.rules import method as method_rules
from checks.engine.rules.problem import CaseContext, Problem, Rule
from checks.engine.rules.torch_free import torch_free

EVERY_CALL: dict[str, Rule] = {
    "kernel_launched": core_rules.kernel_launched,
    "torch_free": torch_free,
    "no_write_outside": core_rules.no_write_outside,
    "inputs_unchanged": core_rules.inputs_unchanged,
    "no_load_outside": core_rules.no_load_outside,
    "output_form": core_rules.output_form,
    "values": core_rules.values,
}
ON_REQUEST: dict[str, Rule] = {
    "limits": core_rules.limits,
    "grouped_order": order_rule.grouped_order,
    "causal_skipping": method_rules.causal_skipping,
    "parallel_over_queries": method_rules.parallel_over_queries,
    "p_never_stored": method_rules.p_never_stored,
}
AFTER_ALL_CASES: dict[str, Rule] = {
    "kernels_matter": core_rules.kernels_matter,
}


def all_rules() -> dict[str, Rule]:
    return {**EVERY_CALL, **ON_REQUEST, **AFTER_ALL_CASES}


def first_problem(ctx: CaseContext) -> Problem | None:
    """The first rule the call breaks, in registry order, or None when it keeps them all."""
    requested = ctx.puzzle.rules
    for rule in EVERY_CALL.values():
        problem = rule(ctx)
        if problem is not None:
            return problem
    for name, rule in ON_REQUEST.items():
        if name in requested:
            problem = rule(ctx, **requested[name])
            if problem is not None:
                return problem
    return None


def after_all_cases(ctx: CaseContext) -> Problem | None:
    for rule in AFTER_ALL_CASES.values():
        problem = rule(ctx)
        if problem is not None:
            return problem
    return None
