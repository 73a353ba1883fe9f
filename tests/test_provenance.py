"""Provenance from fingerprints of memory: which tensors a kernel received were computed outside a kernel,
and which returned outputs a kernel did not write last.

A launch is simulated (`launch`): the tensors it receives are fingerprinted before, its stores are made by
plain torch code standing in for the kernel, and they are fingerprinted after, as `watch_provenance` does
around every real launch. The graded known-wrong kernels (solutions/wrong/01_vector_add/) run the same
code around real launches.
"""

from __future__ import annotations

import threading

import numpy as np
import torch

from checks.engine.child.fingerprints import (
    COPY,
    FILL,
    HOST,
    INPUT,
    KERNEL,
    KERNEL_COPY,
    UNSEEN,
    Provenance,
    fingerprint,
)


def inputs() -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return {"x": torch.randn(64, generator=gen), "y": torch.randn(64, generator=gen)}


def launch(prov: Provenance, stores=None, **args: torch.Tensor) -> None:
    """One launch of the learner's kernel `k` with these tensor arguments; `stores()` is what it writes."""
    tensors = list(args.items())
    prov.before_launch("k", True, tensors)
    if stores is not None:
        stores()
    prov.after_launch(True, tensors)


def test_the_answer_keys_pattern_reads_inputs_and_returns_what_the_kernel_wrote():
    given = inputs()
    prov = Provenance(given, set())
    out = torch.empty(64)
    prov.note(out, FILL)
    launch(prov, lambda: out.copy_(given["x"] + given["y"]), x=given["x"], y=given["y"], out=out)
    assert prov.host_reads == [] and prov.output_origins([out]) == [KERNEL]


def test_a_host_computed_tensor_passed_to_a_kernel_is_a_host_read():
    given = inputs()
    prov = Provenance(given, set())
    answer = torch.tensor([a + b for a, b in zip(given["x"].tolist(), given["y"].tolist(), strict=True)])
    out = torch.empty(64)
    prov.note(out, FILL)  # as the allocation hook notes every torch.empty
    launch(prov, lambda: out.copy_(answer), src=answer, out=out)
    assert len(prov.host_reads) == 1 and prov.host_reads[0].startswith("argument src of k: a (64,) float32")


def test_a_write_by_numpy_or_another_thread_into_a_known_buffer_is_seen():
    given = inputs()
    for write in ("numpy", "thread"):
        prov = Provenance(given, set())
        scratch = torch.zeros(64)
        prov.note(scratch, FILL)
        launch(prov, x=given["x"], scratch=scratch)  # the kernel reads it, still zeros: fine
        if write == "numpy":
            scratch.numpy()[:] = given["x"].numpy() * 2
        else:
            worker = threading.Thread(target=lambda s=scratch: s.mul_(0).add_(given["x"]).mul_(3))
            worker.start()
            worker.join()
        launch(prov, scratch=scratch)
        assert len(prov.host_reads) == 1, write


def test_a_write_with_torch_dispatch_switched_off_after_the_last_launch_is_seen():
    given = inputs()
    prov = Provenance(given, set())
    out = torch.empty(64)
    launch(prov, lambda: out.copy_(given["x"]), x=given["x"], out=out)
    with torch._C._DisableTorchDispatch():
        out.add_(given["y"])
    assert prov.output_origins([out]) == [HOST]


def test_outputs_no_kernel_wrote_are_told_apart():
    given = inputs()
    prov = Provenance(given, set())
    filled = torch.zeros(64)
    prov.note(filled, FILL)
    fresh = torch.from_numpy(given["x"].numpy() + given["y"].numpy())
    assert prov.output_origins([filled, fresh, given["x"], 3]) == [FILL, UNSEEN, INPUT, ""]


def test_layout_copies_constant_fills_and_allocations_are_clean():
    given = {"a": torch.randn(8, 16, generator=torch.Generator().manual_seed(1)).t()}
    prov = Provenance(given, set())
    copies = [given["a"].contiguous(), given["a"].to(torch.float16), given["a"].clone().reshape(-1)]
    flat = torch.empty(128)
    flat.copy_(given["a"].reshape(-1))  # copy_ of an input into an allocation
    zeroed = torch.randn(128)
    zeroed.zero_()  # an in-place constant fill
    for t in [*copies, flat, zeroed]:
        launch(prov, t=t)
    assert prov.host_reads == []
    assert prov.origin(copies[0]) == COPY and prov.origin(zeroed) == FILL


def test_atomics_into_zeros_and_a_chain_through_scratch_buffers_pass():
    given = inputs()
    prov = Provenance(given, set())
    partial, total = torch.empty(64), torch.zeros(64)
    for t in (partial, total):
        prov.note(t, FILL)
    launch(prov, lambda: partial.copy_(given["x"] * 2), x=given["x"], partial=partial)
    launch(prov, lambda: total.add_(partial), partial=partial, total=total)  # split-K style accumulation
    launch(prov, lambda: total.add_(given["y"]), y=given["y"], total=total)
    assert prov.host_reads == [] and prov.output_origins([total]) == [KERNEL]


def test_an_autotuners_restore_between_runs_is_not_a_host_write():
    given = inputs()
    prov = Provenance(given, set())
    out = torch.zeros(64)
    prov.note(out, FILL)
    saved = out.clone()
    launch(prov, lambda: out.add_(given["x"]), x=given["x"], out=out)  # a benchmark run of one config
    out.copy_(saved)  # the autotuner restores the argument (restore_value / reset_to_zero)
    launch(prov, lambda: out.add_(given["x"]), x=given["x"], out=out)  # the real run
    assert prov.host_reads == [] and prov.output_origins([out]) == [KERNEL]


def test_a_write_while_the_outputs_are_saved_is_the_hosts():
    given = inputs()
    prov = Provenance(given, set())
    out = torch.empty(64)
    launch(prov, lambda: out.copy_(given["x"]), x=given["x"], out=out)
    origins = prov.output_origins([out])
    out[0] = 5.0  # another thread, while the grader saved the outputs
    assert origins == [KERNEL] and prov.unchanged_since([out], origins) == [HOST]


def test_the_fingerprint_covers_the_whole_storage_and_every_bit():
    base = torch.zeros(32)
    view = base[4:8]
    before = fingerprint(view)
    base[20] = 1.0  # outside the view, inside its storage
    assert fingerprint(view) != before
    again = fingerprint(view)
    base.view(torch.int32)[20] ^= 1  # one bit
    assert fingerprint(view) != again
    assert fingerprint(base) == fingerprint(torch.from_numpy(np.asarray(base.numpy())))


def test_a_dtype_copy_of_a_kernels_accumulator_may_be_returned_but_not_a_copy_of_an_input():
    given = inputs()
    prov = Provenance(given, set())
    acc = torch.zeros(64)
    prov.note(acc, FILL)
    launch(prov, lambda: acc.add_(given["x"] * 3), x=given["x"], acc=acc)  # atomics into a float32 accumulator
    assert prov.output_origins([acc.to(torch.float16), given["x"].clone()]) == [KERNEL_COPY, UNSEEN]


def test_a_copy_into_a_padded_buffer_counts_as_a_copy_and_one_with_other_values_does_not():
    """Zeros padded to a tile, then copy_ into a slice: a layout copy of the input, not host arithmetic."""
    from checks.engine.child.fingerprints import padded_copy

    a = torch.randn(5, 7)
    padded = torch.zeros(5, 8)
    padded[:, :7] = a
    assert padded_copy(padded, a)
    poisoned = torch.full((5, 8), float("nan"))  # an empty buffer the grader poisoned, partly overwritten
    poisoned[:, :7] = a
    assert padded_copy(poisoned, a)
    doubled = padded.clone()
    doubled[:, :7] *= 2  # the host computed with it
    assert not padded_copy(doubled, a)
    two_fills = padded.clone()
    two_fills[0, 7] = 1.0  # the leftover is not one constant
    assert not padded_copy(two_fills, a) and not padded_copy(a, a)
