"""The prefill puzzles (14): the reference and the answer key against torch's SDPA run on each sequence alone, and the
arithmetic of the prefill rules (checks.engine.judging.rules.prefill). The rules' known-wrong kernels and the right
answers in other styles are graded by tests/test_answer_key.py and tests/test_grader.py."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from checks.engine.judging.rules.prefill import _blocks_per_key, sequence_of
from checks.memory import Arena
from checks.puzzles import p14_varlen_attention as p14
from checks.registry import Case, get_puzzle


def sdpa_per_sequence(inputs: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """(o (T, H_q, D), lse (H_q, T)) in float32: torch's SDPA on each sequence of the packed inputs alone, the lse from
    the scores torch's softmax normalises."""
    q, k, v, cu = inputs["q"].float(), inputs["k"].float(), inputs["v"].float(), inputs["cu_seqlens"].tolist()
    group = q.shape[1] // k.shape[1]
    o = torch.zeros(q.shape)
    lse = torch.zeros(q.shape[1], q.shape[0])
    for start, end in zip(cu[:-1], cu[1:], strict=True):
        if end == start:
            continue
        qb, kb, vb = (x[start:end].transpose(0, 1) for x in (q, k, v))  # (H, n, D)
        o[start:end] = F.scaled_dot_product_attention(
            qb, kb, vb, is_causal=inputs["causal"], scale=inputs["sm_scale"], enable_gqa=True
        ).transpose(0, 1)
        s = qb @ kb.repeat_interleave(group, 0).transpose(1, 2) * inputs["sm_scale"]
        if inputs["causal"]:
            s = s.masked_fill(torch.ones(end - start, end - start, dtype=torch.bool).triu(1), float("-inf"))
        lse[:, start:end] = torch.logsumexp(s, -1)
    return o, lse


def draw(**keys) -> dict:
    return p14.make_inputs(Case(**keys), Arena("cpu", torch.Generator().manual_seed(0)))


CASES = [
    pytest.param({"H_kv": 2, "G": 2, "D": 32, "seq_lens": (9, 0, 20), "causal": True}, id="causal-gqa-empty"),
    pytest.param({"H_kv": 1, "G": 4, "D": 64, "seq_lens": (1, 13), "layout": "sliced"}, id="sliced"),
]


@pytest.mark.parametrize("keys", CASES)
def test_the_reference_is_sdpa_on_each_sequence_alone(keys):
    inputs = draw(**keys)
    o, lse = (e.value for e in p14.reference(inputs))
    want_o, want_lse = sdpa_per_sequence(inputs)
    torch.testing.assert_close(o.float(), want_o, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(lse.float(), want_lse, atol=1e-4, rtol=1e-4)


def test_sliced_inputs_are_views_with_poison_beside_them():
    q = draw(H_kv=1, G=2, D=32, seq_lens=(3, 4), layout="sliced")["q"]
    head = 32 + 8  # heads D + 8 apart: a kernel that takes the head stride for D reads the gap
    assert q.stride() == (3 * head, head, 1)
    past = q.as_strided((7, head), (3 * head, 1), q.storage_offset() + 2 * head)  # the head past the view, each token
    gaps = q.as_strided((7, 2, 8), (3 * head, head, 1), q.storage_offset() + 32)  # between the heads
    assert torch.isnan(past).all() and torch.isnan(gaps).all() and not torch.isnan(q).any()


@pytest.mark.slow  # runs the key in Triton's interpreter
def test_the_answer_key_imported_alone_matches_sdpa_on_each_sequence():
    puzzle = get_puzzle(14)
    spec = importlib.util.spec_from_file_location("key_14_alone", puzzle.solution)
    key = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(key)
    inputs = draw(H_kv=1, G=2, D=32, seq_lens=(5, 0, 70), causal=True)
    o, lse = key.varlen_attention(**inputs)
    want_o, want_lse = sdpa_per_sequence(inputs)
    torch.testing.assert_close(o.float(), want_o, atol=1e-2, rtol=1e-2)
    torch.testing.assert_close(lse, want_lse, atol=1e-3, rtol=1e-3)


def test_a_token_belongs_to_its_sequence_and_empty_sequences_hold_none():
    cu = np.array([0, 3, 3, 7, 7])  # lengths 3, 0, 4, 0
    assert sequence_of(cu, np.arange(7)).tolist() == [0, 0, 0, 2, 2, 2, 2]


def test_the_key_loads_a_block_of_queries_needs():
    blocks = [(0, 3), (4, 7)]  # two blocks of four queries, tokens 0-7
    assert _blocks_per_key(blocks, 0, 8, causal=False) == 2.0
    assert _blocks_per_key(blocks, 0, 8, causal=True) == 1.5  # keys 0-3 for both blocks, 4-7 for the second
    assert _blocks_per_key([], 0, 8, causal=True) == 1.0


def test_chunked_prefill_is_sdpa_over_the_context_and_the_new_tokens_bottom_right():
    from checks.puzzles import p15_chunked_prefill as p15

    keys = {"H_kv": 1, "G": 2, "D": 32, "page_size": 16, "context_lens": (20, 0, 16), "seq_lens": (5, 7, 0)}
    inputs = p15.make_inputs(Case(**keys), Arena("cpu", torch.Generator().manual_seed(0)))
    o, lse = (e.value.float() for e in p15.reference(inputs))
    q, k, v, table, cu = (inputs[name] for name in ("q", "k", "v", "block_table", "cu_seqlens"))
    for b, (start, end) in enumerate(zip(cu[:-1].tolist(), cu[1:].tolist(), strict=True)):
        n, new = int(inputs["context_lens"][b]), end - start
        if new == 0:
            continue
        j = torch.arange(n)
        pages, slots = table[b, j // 16].long(), j % 16
        kb = torch.cat([inputs["k_cache"][pages, slots], k[start:end]]).float().transpose(0, 1)  # (H_kv, n + new, D)
        vb = torch.cat([inputs["v_cache"][pages, slots], v[start:end]]).float().transpose(0, 1)
        allowed = torch.arange(n + new)[None, :] <= n + torch.arange(new)[:, None]  # bottom-right
        want = F.scaled_dot_product_attention(
            q[start:end].float().transpose(0, 1), kb, vb, attn_mask=allowed, scale=inputs["sm_scale"], enable_gqa=True
        )
        torch.testing.assert_close(o[start:end], want.transpose(0, 1), atol=1e-4, rtol=1e-4)
        assert torch.isfinite(lse[:, start:end]).all()


# -- the rules on hand-made logs (tests/test_decoding_rules.py's builder) ----------------------------
def packed_log(
    heads_per_program: int, crossing: bool = False, split: bool = False, key_blocks: bool = False, store: str = "o"
) -> tuple[dict, dict]:
    """Two sequences of 8 and 4 tokens, H_kv = 1, G = 2, blocks of 4 tokens: each program loads its block of q (its
    group's two heads, or one head when `heads_per_program` is 1) and its sequence's keys, and stores its block of
    `store` (o, or a scratch buffer of o's shape); `crossing`: the first program's keys run on into the second
    sequence; `split`: a program loads its block of q in two loads, split after its head's row; `key_blocks`: the keys
    in loads of 4, every block of its sequence."""
    from checks.engine.access.log import STORE
    from tests.test_decoding_rules import Log

    cu = torch.tensor([0, 8, 12], dtype=torch.int32)
    inputs = {"q": torch.zeros(12, 2, 4), "k": torch.zeros(12, 1, 4), "v": torch.zeros(12, 1, 4), "cu_seqlens": cu}
    log = Log(q=(12, 2, 4), k=(12, 1, 4), v=(12, 1, 4), **{store: (12, 2, 4)}).launch((3, 2 // heads_per_program, 1))
    pid = 0
    for start, end in ((0, 4), (4, 8), (8, 12)):
        first = 0 if start < 8 else 8
        last = 11 if crossing and start == 0 else (7 if start < 8 else 11)
        for head in range(0, 2, heads_per_program):
            heads = (head, head + heads_per_program - 1)
            for lo, hi in ((start, start + head), (start + head + 1, end - 1)) if split else ((start, end - 1),):
                log.load(pid, "q", [(lo, hi), heads])
            for lo, hi in (
                ((k, min(last, k + 3)) for k in range(first, last + 1, 4)) if key_blocks else ((first, last),)
            ):
                log.load(pid, "k", [(lo, hi)]).load(pid, "v", [(lo, hi)])
            log.rows.append([STORE, 0, pid, 3, 4 * heads_per_program * 4, start, heads[0], 0, 0, end - 1, heads[1], 3]
                            + [0, 0])  # fmt: skip
            pid += 1
    data = log.data()
    data["regions"][3]["role"] = "output" if store == "o" else "scratch"
    return data, inputs


def test_own_sequence_names_a_load_that_runs_into_the_next_sequence():
    from checks.engine.judging.rules.prefill import own_sequence
    from tests.test_decoding_rules import context

    access, inputs = packed_log(2)
    assert own_sequence(context(access, **inputs)) is None
    access, inputs = packed_log(2, crossing=True)
    problem = own_sequence(context(access, **inputs))
    assert problem is not None and "loaded k tokens 0-11 in one load" in problem.message


def test_kv_once_per_query_block_counts_blocks_of_queries_not_programs():
    from checks.engine.judging.rules.prefill import kv_once_per_query_block
    from tests.test_decoding_rules import context

    access, inputs = packed_log(2)  # a program per block with both heads: each key once per block
    assert kv_once_per_query_block(context(access, **inputs)) is None
    access, inputs = packed_log(1)  # a program per block and head: each key twice per block
    problem = kv_once_per_query_block(context(access, **inputs))
    assert problem is not None and "4.00 times on average, for 2 blocks" in problem.message


def test_a_block_of_queries_is_what_one_program_loads_of_q_however_many_loads():
    from checks.engine.judging.rules.prefill import kv_once_per_query_block
    from tests.test_decoding_rules import context

    access, inputs = packed_log(2, split=True)  # a program per block, its tile in two loads: each key once per block
    assert kv_once_per_query_block(context(access, **inputs)) is None
    access, inputs = packed_log(1, split=True)  # a program per block and head, in two loads: 8 ranges, 2 blocks
    problem = kv_once_per_query_block(context(access, **inputs))
    assert problem is not None and "4.00 times on average, for 2 blocks" in problem.message


def test_causal_skipping_packed_owns_the_queries_a_program_loads_whatever_it_stores():
    from checks.engine.judging.rules.prefill import causal_skipping_packed
    from tests.test_decoding_rules import context

    for store in ("o", "scratch"):  # o itself, or a scratch buffer that another kernel would cast into o
        access, inputs = packed_log(2, key_blocks=True, store=store)
        problem = causal_skipping_packed(context(access, **inputs, causal=True))
        assert problem is not None and "(owns tokens 0-3) loaded k tokens 4-7" in problem.details[0], store
        assert causal_skipping_packed(context(access, **inputs, causal=False)) is None


def test_no_padded_work_counts_the_buffers_the_host_filled_with_copies_of_the_inputs():
    from checks.engine.judging.rules.prefill import no_padded_work
    from tests.test_decoding_rules import context

    access, inputs = packed_log(2)
    assert no_padded_work(context(access, **inputs), tail=1) is None
    q = access["regions"][0]
    for rows, pieces in ((12, [(0, 0, 12)]), (16, [(0, 0, 8), (8, 64, 4)])):  # a clone; 8 rows a sequence, a copy_ each
        padded = dict(
            q, name="padded", label="padded", role="scratch", size=rows * 8, numel=rows * 8, shape=[rows, 2, 4]
        )
        access["regions"] = [*access["regions"][:4], padded]
        access["reads"] = [*access["reads"][:4], torch.zeros(0, dtype=torch.int32)]
        access["copies"] = [
            {"shape": [n, 2, 4], "src": {"region": 0, "strides": [8, 4, 1], "offset": 8 * s},
             "dst": {"region": 4, "strides": [8, 4, 1], "offset": at}}
            for s, at, n in pieces
        ]  # fmt: skip
        problem = no_padded_work(context(access, **inputs), tail=1)
        if rows == 12:
            assert problem is None
        else:
            assert problem is not None and "copied q (12 tokens) into a buffer of 16 token rows, with 2 copies" in (
                problem.message
            )


def test_one_launch_per_kernel_names_a_copy_of_an_input_per_sequence():
    from checks.engine.judging.rules.prefill import one_launch_per_kernel
    from tests.test_decoding_rules import context

    access, inputs = packed_log(2)
    whole = {"region": 0, "strides": [8, 4, 1], "offset": 0}
    access["copies"] = [{"shape": [12, 2, 4], "src": whole, "dst": dict(whole, region=3)}]  # one copy of all of q
    assert one_launch_per_kernel(context(access, **inputs)) is None
    access["copies"] = [
        {"shape": [n, 2, 4], "src": dict(whole, offset=8 * s), "dst": dict(whole, region=3, offset=8 * s)}
        for s, n in ((0, 8), (8, 4))
    ]  # a copy_ per sequence
    problem = one_launch_per_kernel(context(access, **inputs))
    assert problem is not None and "copied q in 2 parts for 2 sequences" in problem.message


def test_one_launch_per_kernel_names_the_kernel_launched_again():
    from checks.engine.judging.rules.prefill import one_launch_per_kernel
    from tests.test_decoding_rules import context

    access, inputs = packed_log(2)
    assert one_launch_per_kernel(context(access, **inputs)) is None
    access["launches"] = access["launches"] * 2
    problem = one_launch_per_kernel(context(access, **inputs))
    assert problem is not None
    assert "launched `_attn_decode_split` 2 times in one call for 2 sequences" in problem.message
