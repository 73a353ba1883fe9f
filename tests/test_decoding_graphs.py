"""The decoding tools run only on a GPU: here, that `python -m bench decoding-graphs` reads its arguments and plans its
shapes, and that the launch helper they share (bench.decoding_launch) calls the answer keys' own kernels, on CPU."""

from __future__ import annotations

import pytest
import torch

from bench import decoding_graphs as graphs
from bench import decoding_launch as launch


def test_help_and_arguments(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        graphs.parse_args(["--help"])
    assert exit_.value.code == 0 and "CUDA graph" in capsys.readouterr().out
    args = graphs.parse_args(["--out", str(tmp_path / "t.csv"), "--puzzles", "11,13"])
    assert args.puzzles == ["11", "13"]
    with pytest.raises(SystemExit):
        graphs.parse_args(["--out", "x.csv", "--puzzles", "14"])


def test_the_shapes_asked_for():
    shapes = graphs.shapes(["11", "12", "13"], quick=False)
    assert len(shapes) == 8 + 8 + 16  # B in {1, 8} x 4 lengths; 13 in two page sizes
    assert {s["H_kv"] for s in shapes if s["puzzle"] == "11"} == {32}
    assert {s["H_kv"] for s in shapes if s["puzzle"] != "11"} == {8}
    assert {s["page_size"] for s in shapes if s["puzzle"] == "13"} == {16, 64}
    assert all(s["D"] == 128 and s["H_q"] == 32 for s in shapes)


@pytest.mark.parametrize(("n_ctx", "heads"), [(100, 4), (4096, 32), (131072, 8), (16, 1056)])
def test_the_split_arithmetic_is_the_keys_own(n_ctx, heads):
    """split_count with key 11's numbers in the interpreter (blocks of 16, eight programs per SM, 132 SMs, at least
    MIN_BLOCKS blocks a split) gives what the key's own launch_shape gives."""
    key = launch.load_key("11")
    ours = launch.split_count(n_ctx, heads, 16, key.PROGRAMS_PER_SM, launch.INTERPRETER_SMS, key.MIN_BLOCKS)
    assert ours == key.launch_shape(n_ctx, heads, torch.device("cpu"))


class RecordingKernel:
    """A split kernel that notes each launch's grid and launches the key's own."""

    def __init__(self, kernel):
        self.kernel, self.grids = kernel, []

    def __getitem__(self, grid):
        self.grids.append(grid)
        return self.kernel[grid]


@pytest.mark.parametrize("puzzle", ["11", "12"])
def test_a_key_at_another_launch_shape_gives_the_keys_answer(puzzle):
    """at_launch_shape runs the key's own host function and kernels with other splits (Triton's interpreter): the
    grid has the splits asked for, the output matches the key's own call, and the key is left as it was."""
    key = launch.load_key(puzzle)
    torch.manual_seed(0)
    inputs = launch.draw({"B": 1, "H_kv": 2, "N": 96}, device="cpu", d=16, h_q=2 if puzzle == "11" else 4)
    args = launch.key_args(puzzle, inputs)
    expected = getattr(key, launch.FUNCTIONS[puzzle])(*args)
    own_shape, own_split = key.launch_shape, key._attn_decode_split
    recording = RecordingKernel(own_split)
    # 96 keys in blocks of 32, at least one block a split, one program per SM: three splits of 32 keys
    at_shape = launch.at_launch_shape(key, puzzle, per_sm=1, block_n=32, warps=4, stages=2, min_blocks=1,
                                      split_kernel=recording)  # fmt: skip
    got = at_shape(*args)
    assert [grid[0] for grid in recording.grids] == [3]
    assert key.launch_shape(96, 2, torch.device("cpu"))[:2] != (32, 32)  # the key's own shape is another
    assert torch.allclose(got[0].float(), expected[0].float(), atol=1e-2)
    assert key.launch_shape is own_shape and key._attn_decode_split is own_split


def test_the_vector_form_runs_in_the_keys_place():
    """tune-flash-decoding's vector form (`_split_vector`) takes the key's split kernel's place through the same
    helper and gives the key's answer (Triton's interpreter)."""
    from bench.tune_flash_decoding import _split_vector

    key = launch.load_key("11")
    torch.manual_seed(1)
    inputs = launch.draw({"B": 1, "H_kv": 2, "N": 80}, device="cpu", d=16, h_q=2)
    args = launch.key_args("11", inputs)
    expected = key.flash_decoding(*args)
    recording = RecordingKernel(_split_vector)
    got = launch.at_launch_shape(key, "11", 1, 16, 4, 1, min_blocks=2, split_kernel=recording)(*args)
    assert [grid[0] for grid in recording.grids] == [3]  # 5 blocks of 16 keys, at least 2 a split
    assert torch.allclose(got[0].float(), expected[0].float(), atol=1e-2)
    assert torch.allclose(got[1], expected[1], atol=1e-3)
