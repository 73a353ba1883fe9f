"""The registry agrees with the contract, and every ready puzzle has all of its parts."""

from __future__ import annotations

import ast

import pytest

from checks.authoring.stubs import BEGIN, END, make_stub
from checks.authoring.wrong import known_wrong
from checks.puzzles import spec_module
from checks.registry import ROOT, get_puzzle, load_puzzles
from tests.helpers import puzzle_params, written_params

# The contract's table (shared/course-contract.md), in course order: number, slug, the function the
# learner defines. Lettered steps come before their puzzle.
CONTRACT = [
    ("1", "vector_add", "vector_add"),
    ("2", "matrix_add", "matrix_add"),
    ("3", "matmul", "matmul"),
    ("4", "matmul_fast", "matmul_fast"),
    ("5", "softmax", "softmax"),
    ("6", "softmax_blocked", "softmax_blocked"),
    ("7", "softmax_online", "softmax_online"),
    ("8a", "attention_one_block", "attention_one_block"),
    ("8", "flash_attention_v1", "flash_attention_v1"),
    ("9a", "flash_attention_v2_fwd_noncausal", "flash_attention_v2_fwd_noncausal"),
    ("9", "flash_attention_v2_fwd", "flash_attention_v2_fwd"),
    ("10a", "softmax_backward", "softmax_backward"),
    ("10b", "flash_attention_v2_bwd_dkdv", "flash_attention_v2_bwd_dkdv"),
    ("10", "flash_attention_v2_bwd", "flash_attention_v2_bwd"),
    ("11", "flash_decoding", "flash_decoding"),
    ("12", "gqa_decoding", "gqa_decoding"),
    ("13", "paged_decoding", "paged_decoding"),
    ("14", "varlen_attention", "varlen_attention"),
    ("15", "chunked_prefill", "chunked_prefill"),
    # -- the Hopper track
    ("16a", "tma_copy", "tma_copy"),
    ("16b", "hopper_matmul", "hopper_matmul"),
    ("16", "hopper_attention_fwd", "hopper_attention_fwd"),
]


def test_registry_matches_the_contract():
    got = [(p.number, p.slug, p.name) for p in load_puzzles()]
    assert got == CONTRACT


# The contract's inputs and returns, word for word (shared/course-contract.md), for the puzzles whose puzzles.yaml
# entries state them so: the registry and the README's table (made from it) write them without the code marks.
CONTRACT_WORDS = {
    "11": (
        "q (B, H, D) float16, one query per head; k, v (B, H, N, D) float16, N >= 1 (long: up to 2^17 on a GPU), "
        "D in {64, 128}; may be strided views",
        "`(o, lse)`: o (B, H, D) float16; lse (B, H) float32, natural log",
    ),
    "12": (
        "q (B, H_q, D); k, v (B, H_kv, N, D); H_q = G·H_kv, G in {1, 2, 4, 8}; else as 11",
        "`(o, lse)`: (B, H_q, D) float16, (B, H_q) float32",
    ),
    "13": (
        "q (B, H_q, D) float16; k_cache, v_cache (num_pages, page_size, H_kv, D) float16, page_size in {16, 32, 64}; "
        "block_table (B, max_pages) int32, page numbers in order; seq_lens (B,) int32, 1 <= seq_lens[b] <= "
        "max_pages·page_size; H_q = G·H_kv",
        "`(o, lse)` as 12",
    ),
    "14": (
        "sequences packed along the first dim: q (T, H_q, D), k, v (T, H_kv, D) float16, T >= 1, D in {32, 64, 128}, "
        "H_q = G·H_kv, G in {1, 2, 4, 8}, may be views into larger buffers (strides as given); cu_seqlens (B + 1,) "
        "int32, 0 = cu_seqlens[0] <= ... <= cu_seqlens[B] = T (a sequence may be empty); max_seqlen int, the longest "
        "length; causal bool (within each sequence; every token sees at least itself, so every lse is finite)",
        "`(o, lse)`: o a new contiguous (T, H_q, D) float16 tensor; lse (H_q, T) float32, natural log",
    ),
    "15": (
        "the new tokens packed as in 14 (q, k, v, cu_seqlens; same D and G; a sequence may have no new tokens); each "
        "sequence's earlier tokens in a paged cache laid out as in 13 (k_cache, v_cache (num_pages, page_size, H_kv, "
        "D), page_size in {16, 32, 64}; block_table (B, max_pages) int32, whose entries past a context's pages may "
        "name any page; context_lens (B,) int32, 0 <= context_lens[b] <= max_pages·page_size; the cache holds contexts "
        "only, the new tokens' k, v come packed); causal, aligned bottom-right: new token i of sequence b sees its "
        "context_lens[b] cached tokens and new tokens 0..i (no max_seqlen: a grid sized by T serves)",
        "`(o, lse)` as 14",
    ),
}


@pytest.mark.parametrize("number", sorted(CONTRACT_WORDS, key=int))
def test_inputs_and_returns_are_the_contracts_words(number):
    inputs, returns = (words.replace("`", "") for words in CONTRACT_WORDS[number])
    puzzle = get_puzzle(number)
    assert (puzzle.inputs, puzzle.returns) == (inputs, returns)
    row = next(line for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
               if line.startswith(f"| {number} | "))  # fmt: skip
    assert f"| {inputs} | {returns} |" in row


def test_paths_follow_the_numbering():
    for p in load_puzzles():
        assert p.notebook == ROOT / "notebooks" / f"{p.stem}.ipynb"
        assert p.solution == ROOT / "solutions" / f"{p.stem}.py"


@pytest.mark.parametrize("puzzle", puzzle_params())
def test_ready_puzzle_has_every_part(puzzle):
    assert puzzle.solution.exists() and puzzle.notebook.exists() and puzzle.notebook_source.exists()
    module = spec_module(puzzle)
    for name in ("make_inputs", "reference", "baseline", "work"):
        assert callable(getattr(module, name)), f"checks/puzzles module of {puzzle.stem} lacks {name}"
    assert len(known_wrong(puzzle)) >= 6, "at least six known-wrong kernels per puzzle"
    assert 2 <= len(puzzle.hints) <= 3
    assert puzzle.cases.cpu and puzzle.cases.gpu
    assert puzzle.bench, "a GPU timing case"
    assert puzzle.tolerance, "tolerances live in puzzles.yaml"


@pytest.mark.parametrize("puzzle", written_params())
def test_solution_defines_the_contract_names_and_marks_the_learner_part(puzzle):
    source = puzzle.solution.read_text(encoding="utf-8")
    tree = ast.parse(source)
    defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    assert set(puzzle.defines) <= defined
    assert source.count(BEGIN) == source.count(END) >= 1
    stub = make_stub(source, puzzle.number)
    compile(stub, str(puzzle.solution), "exec")  # the learner's stub must at least parse
    assert "FILL ME IN (roughly" in stub and BEGIN not in stub


def test_course_order_follows_the_file():
    assert [p.order for p in load_puzzles()] == list(range(1, len(CONTRACT) + 1))


@pytest.mark.parametrize(
    ("given", "number"),
    [(7, "7"), ("7", "7"), ("07", "7"), (" 7 ", "7"), ("10a", "10a"), ("10A", "10a"), ("010b", "10b"), (10, "10")],
)
def test_a_puzzle_is_found_by_any_spelling_of_its_id(given, number):
    assert get_puzzle(given).number == number


@pytest.mark.parametrize(
    ("number", "stem", "literal"),
    [
        ("7", "07_softmax_online", "7"),
        ("10a", "10a_softmax_backward", '"10a"'),
        ("10", "10_flash_attention_v2_bwd", "10"),
    ],
)
def test_lettered_ids_in_file_names_and_generated_code(number, stem, literal):
    puzzle = get_puzzle(number)
    assert puzzle.stem == stem and puzzle.literal == literal
    assert puzzle.wrong_dir == ROOT / "solutions" / "wrong" / stem
    assert spec_module(puzzle).__name__ == f"checks.puzzles.p{stem}"


def test_step_10b_reuses_puzzle_10s_inputs_rather_than_a_copy():
    from checks.puzzles import p10_flash_attention_v2_bwd as p10

    assert spec_module(get_puzzle("10b")).make_inputs is p10.make_inputs


@pytest.mark.parametrize("given", [99, "abc", "10c", ""])
def test_unknown_puzzle_is_a_clear_error(given):
    known = ", ".join(number for number, _, _ in CONTRACT)
    with pytest.raises(LookupError, match=f"^There is no puzzle {given}; the puzzles are {known}.$"):
        get_puzzle(given)


def test_the_known_wrong_printer_takes_lettered_ids(capsys):
    from checks.authoring.wrong import main as print_wrong

    assert print_wrong(["10b", "dk_missing_scale"]) == 0
    assert "def flash_attention_v2_bwd_dkdv" in capsys.readouterr().out
    assert print_wrong(["10a", "no_such_kernel"]) == 2
    assert "Puzzle 10a has no known-wrong kernel" in capsys.readouterr().err


@pytest.mark.parametrize("puzzle", written_params())
def test_every_edited_answer_key_still_applies_and_differs(puzzle):
    from checks.authoring.wrong import EDIT_SUFFIX, answer_key_body, source_of

    for path in known_wrong(puzzle):
        source = source_of(puzzle, path)  # raises when an edit no longer finds its text
        compile(source, str(path), "exec")
        if path.name.endswith(EDIT_SUFFIX):
            assert answer_key_body(puzzle) not in source, f"{path.name} must change the answer key"


def test_an_edit_that_no_longer_applies_says_so():
    from checks.authoring.wrong import EditError, apply_edits

    with pytest.raises(EditError, match="exactly once"):
        apply_edits("a = 1\n", [{"old": "b = 2\n", "new": ""}], "x.edit.yaml")
