"""Method rules of the decoding puzzles (checks.engine.judging.rules.decoding): hand-made access logs, then real
kernels."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from checks.engine.access.log import FIELDS, LOAD, MAX_DIMS, AccessLog
from checks.engine.contract.observations import CaseObservation
from checks.engine.judging.rules import rulebook
from checks.engine.judging.rules.decoding import kv_once_per_group, page_owners, pages_in_table, split_kv
from checks.engine.judging.rules.problem import CaseContext
from checks.registry import Case, get_puzzle
from tests.helpers import run_rule


# -- hand-made logs ---------------------------------------------------------------------------------
class Log:
    """An access log built one load at a time, with the per-element counts the recorder keeps."""

    def __init__(self, **tensors: tuple[int, ...]) -> None:
        self.names = list(tensors)
        self.shapes = [tuple(s) for s in tensors.values()]
        self.rows: list[list[int]] = []
        self.counts = [torch.zeros(math.prod(s), dtype=torch.int32) for s in self.shapes]
        self.launches: list[dict[str, Any]] = []

    def launch(self, grid: tuple[int, int, int]) -> Log:
        self.launches.append({"kernel": "_attn_decode_split", "grid": list(grid)})
        return self

    def load(self, pid: int, name: str, box: list[tuple[int, int]]) -> Log:
        r = self.names.index(name)
        shape = self.shapes[r]
        box = box + [(0, n - 1) for n in shape[len(box) :]]
        index = torch.zeros(shape, dtype=torch.bool)
        index[tuple(slice(lo, hi + 1) for lo, hi in box)] = True
        self.counts[r] += index.flatten().int()
        lo = [b[0] for b in box] + [0] * (MAX_DIMS - len(box))
        hi = [b[1] for b in box] + [0] * (MAX_DIMS - len(box))
        self.rows.append([LOAD, len(self.launches) - 1, pid, r, int(index.sum()), *lo, *hi, 0])
        return self

    def data(self) -> dict[str, Any]:
        regions = []
        for name, shape in zip(self.names, self.shapes, strict=True):
            strides = [math.prod(shape[d + 1 :]) for d in range(len(shape))]
            numel = math.prod(shape)
            regions.append({"name": name, "label": name, "role": "input", "element_size": 2, "size": numel,
                            "shape": list(shape), "strides": strides, "offset": 0, "numel": numel})  # fmt: skip
        n = len(regions)
        return AccessLog(
            regions=regions, reads=self.counts, writes=[torch.zeros(0, dtype=torch.int32)] * n,
            loaded=[int(c.sum()) for c in self.counts], stored=[0] * n, outside_loads=[0] * n, outside_stores=[0] * n,
            launches=self.launches, records=torch.tensor(self.rows, dtype=torch.int64).reshape(-1, len(FIELDS)),
        ).to_dict()  # fmt: skip


def context(access: dict[str, Any] | None, **inputs: Any) -> CaseContext:
    return CaseContext(None, Case(), inputs, [], [], CaseObservation(index=0, access=access))


def dense(b: int, h: int, n: int, d: int = 4, g: int = 1) -> dict[str, torch.Tensor]:
    return {"q": torch.zeros(b, h * g, d), "k": torch.zeros(b, h, n, d), "v": torch.zeros(b, h, n, d)}


def decoding_log(b: int, h: int, n: int, splits: int, d: int = 4, g: int = 1, loads_per_head: int = 1) -> dict:
    """A split kernel's log: program (s, bh) loads keys [s * n / splits, ...) of head bh, `loads_per_head` times."""
    log = Log(q=(b, h * g, d), k=(b, h, n, d), v=(b, h, n, d)).launch((splits, b * h * loads_per_head, 1))
    size = -(-n // splits)
    for bh in range(b * h * loads_per_head):
        z, y = divmod(bh // loads_per_head, h)
        for s in range(splits):
            pid = s + splits * bh
            lo, hi = s * size, min(n, (s + 1) * size) - 1
            log.load(pid, "q", [(z, z), (y * g, y * g + g - 1)])
            log.load(pid, "k", [(z, z), (y, y), (lo, hi)]).load(pid, "v", [(z, z), (y, y), (lo, hi)])
    return log.data()


# -- split_kv ---------------------------------------------------------------------------------------
def test_split_kv_fails_one_program_per_long_head_and_names_it() -> None:
    ctx = context(decoding_log(1, 2, 600, splits=1), **dense(1, 2, 600))
    problem = run_rule("split_kv", ctx, min_n=512, max_heads=64)
    assert problem is not None and problem.rule == "split_kv"
    assert "the keys of 2 heads with 512 or more keys were read by one program each" in problem.message
    assert "600 keys" in problem.message


def test_split_kv_passes_two_programs_per_head() -> None:
    assert split_kv(context(decoding_log(1, 2, 600, splits=2), **dense(1, 2, 600)), min_n=512) is None


@pytest.mark.parametrize(("b", "h", "n"), [(1, 2, 511), (2, 40, 600)], ids=["short heads", "many heads"])
def test_split_kv_allows_one_program_per_head_where_a_gpu_is_busy_anyway(b: int, h: int, n: int) -> None:
    assert split_kv(context(decoding_log(b, h, n, splits=1), **dense(b, h, n)), min_n=512, max_heads=64) is None


def test_split_kv_judges_the_sequences_of_a_paged_cache() -> None:
    # two sequences in pages of 4: sequence 0 has 8 keys in pages 2, 0; sequence 1 has 3 keys in page 1
    inputs = {"q": torch.zeros(2, 1, 4), "k_cache": torch.zeros(4, 4, 1, 4), "v_cache": torch.zeros(4, 4, 1, 4),
              "block_table": torch.tensor([[2, 0], [1, 3]], dtype=torch.int32),
              "seq_lens": torch.tensor([8, 3], dtype=torch.int32)}  # fmt: skip
    log = Log(q=(2, 1, 4), k_cache=(4, 4, 1, 4), v_cache=(4, 4, 1, 4)).launch((2, 2, 1))
    log.load(0, "k_cache", [(2, 2), (0, 3)]).load(0, "k_cache", [(0, 0), (0, 3)]).load(1, "k_cache", [(1, 1), (0, 2)])
    assert split_kv(context(log.data(), **inputs), min_n=8) is not None  # sequence 0: one program, 8 keys
    assert split_kv(context(log.data(), **inputs), min_n=9) is None
    log.load(2, "k_cache", [(0, 0), (0, 3)])  # a second program reads sequence 0's second page
    assert split_kv(context(log.data(), **inputs), min_n=8) is None


# -- kv_once_per_group ------------------------------------------------------------------------------
def test_kv_once_per_group_fails_k_read_once_per_query_head() -> None:
    log = decoding_log(1, 2, 64, splits=2, g=4, loads_per_head=4)
    problem = run_rule("kv_once_per_group", context(log, **dense(1, 2, 64, g=4)))
    assert problem is not None and problem.rule == "kv_once_per_group"
    assert "4.00 times" in problem.message and "G = 4" in problem.message


def test_kv_once_per_group_passes_one_load_per_group() -> None:
    assert kv_once_per_group(context(decoding_log(1, 2, 64, splits=2, g=4), **dense(1, 2, 64, g=4))) is None


# -- pages_in_table ---------------------------------------------------------------------------------
PAGED = {
    "q": torch.zeros(2, 2, 4),
    "k_cache": torch.zeros(5, 4, 1, 4),
    "v_cache": torch.zeros(5, 4, 1, 4),
    "block_table": torch.tensor([[3, 1, 4], [0, 4, 4]], dtype=torch.int32),  # page 2: no sequence; 4: unused entries
    "seq_lens": torch.tensor([6, 4], dtype=torch.int32),  # sequence 0: page 3 whole, page 1 slots 0-1
}


def paged_log(extra: list[tuple[int, str, list[tuple[int, int]]]] = ()) -> dict:
    log = Log(q=(2, 2, 4), k_cache=(5, 4, 1, 4), v_cache=(5, 4, 1, 4)).launch((1, 2, 1))
    for name in ("k_cache", "v_cache"):
        log.load(0, "q", [(0, 0)]).load(0, name, [(3, 3), (0, 3)]).load(0, name, [(1, 1), (0, 1)])
        log.load(1, "q", [(1, 1)]).load(1, name, [(0, 0), (0, 3)])
    for pid, name, box in extra:
        log.load(pid, name, box)
    return log.data()


def test_page_owners_follow_the_table_up_to_seq_lens() -> None:
    owners = page_owners(PAGED["block_table"], PAGED["seq_lens"], 4, 5)
    assert owners.tolist() == [1, 0, -1, 0, -1]


def test_pages_in_table_passes_a_kernel_that_reads_its_sequences_keys() -> None:
    assert pages_in_table(context(paged_log(), **PAGED)) is None


@pytest.mark.parametrize(
    ("box", "said"),
    [([(1, 1), (2, 2)], "past seq_lens"), ([(4, 4), (0, 0)], "pages no sequence uses"), ([(2, 2), (0, 3)], "page")],
    ids=["slot past seq_lens in the last page", "an unused table entry", "a page of no sequence"],
)
def test_pages_in_table_fails_a_read_of_a_slot_that_holds_no_key(box: list[tuple[int, int]], said: str) -> None:
    problem = run_rule("pages_in_table", context(paged_log([(0, "k_cache", box)]), **PAGED))
    assert problem is not None and problem.rule == "pages_in_table" and said in problem.message


def test_pages_in_table_fails_a_program_that_reads_another_sequences_page() -> None:
    problem = pages_in_table(context(paged_log([(1, "v_cache", [(3, 3), (0, 3)])]), **PAGED))
    assert problem is not None and "query of sequence 1 and page 3" in problem.message


def paged_reads(reads: dict[int, list[tuple[int, int, int]]]) -> dict:
    """A log where program b (sequence b) loads, from both caches, the slots lo-hi of each (page, lo, hi)."""
    log = Log(q=(2, 2, 4), k_cache=(5, 4, 1, 4), v_cache=(5, 4, 1, 4)).launch((1, 2, 1))
    for b, pages in reads.items():
        log.load(b, "q", [(b, b)])
        for name in ("k_cache", "v_cache"):
            for page, lo, hi in pages:
                log.load(b, name, [(page, page), (lo, hi)])
    return log.data()


@pytest.mark.parametrize(
    ("reads", "said", "not_said"),
    [
        ({0: [(3, 0, 3)], 1: [(0, 0, 1)]}, "every sequence misses its last 2 keys", "whole pages"),
        ({0: [(1, 0, 1)], 1: [(0, 0, 1)]}, "make the programs' key ranges cover them all", "misses its last"),
        ({0: [(1, 0, 1)], 1: [(0, 0, 3)]}, "the keys missed are whole pages", "misses its last"),
    ],
    ids=["the same tail of every sequence", "a tail of one, a page of the other", "a page of one sequence"],
)
def test_keys_never_read_says_a_tail_only_where_every_sequence_misses_one(
    reads: dict[int, list[tuple[int, int, int]]], said: str, not_said: str
) -> None:
    """Sequence 0 is page 3 then slots 0-1 of page 1; sequence 1 is page 0. Missing the last 2 keys of both is a short
    key range; missing page 3 of one and the tail of the other is not, nor is one page missed by a kernel that read
    each sequence's other keys."""
    from checks.engine.judging.rules.decoding import keys_never_read

    text = keys_never_read(context(paged_reads(reads), **PAGED))
    assert said in text and not_said not in text


# -- the registry -----------------------------------------------------------------------------------
@pytest.mark.parametrize("number", [11, 12, 13])
def test_the_decoding_rules_are_registered_and_take_their_params(number: int) -> None:
    rules = get_puzzle(number).rules
    asked_for = {e.name for e in rulebook.checked(rulebook.ON_REQUEST)}
    assert {"split_kv"} <= set(rules) <= asked_for
    assert rulebook.parameter_problems([get_puzzle(number)]) == []
    for name, params in rules.items():
        assert params.get("message", "x.").endswith(".")
        assert run_rule(name, context(None, **dense(1, 1, 600)), **params) is None  # on a GPU: silent


# -- real kernels, recorded in a process of their own ------------------------------------------------
@pytest.mark.slow
def test_the_split_key_reads_each_head_with_several_programs_and_no_split_does_not() -> None:
    from tests.test_method_rules import problems, recorded

    case = next(i for i, c in enumerate(get_puzzle(11).cases.cpu) if c.N >= 512)
    assert problems(recorded(11, "key", case)) == []
    assert problems(recorded(11, "no_split", case)) == ["split_kv"]


@pytest.mark.slow
def test_the_paged_key_reads_only_live_slots_and_whole_blocks_do_not(tmp_path) -> None:
    from checks.engine.access.log import AccessLog
    from checks.engine.judging.rules.decoding import reader_image
    from checks.learner.maps import draw
    from tests.test_method_rules import _RECORDED, problems, recorded

    key = recorded(13, "key", 0)
    assert problems(key) == []
    assert problems(recorded(13, "k_whole_last_block", 0))[:1] == ["pages_in_table"]  # and K read 1.04x
    # the access map: sequence 0 (300 keys) is read by several programs, sequence 1 (45 keys) by one
    image, reads, labels, ends = reader_image(key.inputs, AccessLog.from_dict(key.obs.access))
    assert labels[:2] == ["b0 h0", "b0 h1"] and ends[:3] == [300, 300, 45] and len({p for p in image[0] if p >= 0}) > 1
    seq1 = labels.index("b1 h0")
    assert len({p for p in image[seq1][:45]}) == 1 and (image[seq1][48:] < 0).all()
    assert (reads[seq1][:45] == 1).all() and (reads[seq1][45:] == 0).all(), "nothing past seq_lens is read"
    png = draw(13, _RECORDED[(13, "key", 0)], _RECORDED[(13, "key", 0)], tmp_path / "map.png")
    assert png.stat().st_size > 1000
