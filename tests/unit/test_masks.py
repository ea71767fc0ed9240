"""Exact mask patterns, BFS graph quantities against hand-derived values, and input validation."""

import pytest
import torch

from rankcollapse.core import masks


def as_rows(mask: torch.Tensor) -> list[str]:
    return ["".join("1" if v else "." for v in row) for row in mask.tolist()]


def test_complete_and_causal_patterns():
    assert as_rows(masks.complete_mask(3)) == ["111", "111", "111"]
    assert as_rows(masks.causal_mask(4)) == ["1...", "11..", "111.", "1111"]


def test_sliding_window_pattern():
    assert as_rows(masks.sliding_window_mask(5, 1)) == ["11...", "111..", ".111.", "..111", "...11"]


def test_causal_sliding_window_pattern():
    assert as_rows(masks.causal_sliding_window_mask(5, 2)) == ["1....", "11...", "111..", ".111.", "..111"]


def test_strided_pattern_sparse_transformer():
    # local |i-j| < 2 or (i-j) % 2 == 0, causal
    assert as_rows(masks.strided_mask(5, 2)) == ["1....", "11...", "111..", ".111.", "1.111"]
    assert as_rows(masks.strided_mask(5, 2, causal=False)) == ["111.1", "1111.", "11111", ".1111", "1.111"]


def test_dilated_window_pattern():
    assert as_rows(masks.dilated_window_mask(6, 1, 2)) == ["1.1...", ".1.1..", "1.1.1.", ".1.1.1", "..1.1.",
                                                           "...1.1"]


def test_global_window_pattern():
    assert as_rows(masks.global_window_mask(5, 1, n_global=1)) == ["11111", "111..", "1111.", "1.111",
                                                                   "1..11"]


def test_prefix_mask_pattern_centers_and_radius():
    assert as_rows(masks.prefix_mask(5, 2)) == ["11...", "11...", "111..", "1111.", "11111"]
    assert torch.equal(masks.build_mask("prefix", 9, window=3), masks.prefix_mask(9, 3))
    assert torch.equal(masks.prefix_mask(6, 1), masks.causal_mask(6))  # a one-token prefix is causal
    graph = masks.describe_mask(masks.prefix_mask(8, 3))  # every prefix token is attended by every token
    assert graph.centers == (0, 1, 2) and graph.radius == 1 and graph.diameter == 1
    assert graph.n_edges == 8 * 9 // 2 + 3  # the causal triangle and the prefix's 3 edges above it
    with pytest.raises(ValueError, match=r"prefix must be an integer in \[1, 7\] for n_tokens=8, got 8"):
        masks.prefix_mask(8, 8)


def test_random_mask_is_seeded_and_keeps_self_loops():
    a = masks.random_mask(20, 0.1, seed=3)
    assert torch.equal(a, masks.random_mask(20, 0.1, seed=3))
    assert not torch.equal(a, masks.random_mask(20, 0.1, seed=4))
    assert a.diagonal().all()
    assert torch.equal(masks.random_mask(6, 0.0, seed=0), torch.eye(6, dtype=torch.bool))


def test_mask_from_matrix_adds_self_loops():
    m = masks.mask_from_matrix([[False, True], [False, False]])
    assert as_rows(m) == ["11", ".1"]


def test_build_mask_dispatch_matches_builders():
    assert torch.equal(masks.build_mask("sliding_window", 9, window=2), masks.sliding_window_mask(9, 2))
    assert torch.equal(masks.build_mask("global_window", 9, window=1, n_global=2),
                       masks.global_window_mask(9, 1, 2))
    assert torch.equal(masks.build_mask("random", 9, density=0.3, seed=1), masks.random_mask(9, 0.3, 1))


@pytest.mark.parametrize(
    "n, w, r_sliding, r_uni",
    [
        # hand-derived: sliding window center floor((N-1)/2) reaches both ends in ceil(floor(N/2)/w) hops;
        # uni-directional window: only token 0 is a center, it reaches token N-1 in ceil((N-1)/w) hops.
        (2, 1, 1, 1),
        (5, 1, 2, 4),
        (8, 1, 4, 7),
        (8, 3, 2, 3),
        (9, 2, 2, 4),
        (16, 3, 3, 5),
        (128, 8, 8, 16),
    ],
)
def test_radius_of_windows(n, w, r_sliding, r_uni):
    assert masks.graph_radius(masks.sliding_window_mask(n, w)) == r_sliding
    assert masks.graph_radius(masks.causal_sliding_window_mask(n, w)) == r_uni


def test_centers_radius_diameter_of_standard_masks():
    complete = masks.describe_mask(masks.complete_mask(5))
    assert complete.centers == (0, 1, 2, 3, 4) and complete.radius == 1 and complete.diameter == 1
    causal = masks.describe_mask(masks.causal_mask(5))
    assert causal.centers == (0,) and causal.radius == 1 and causal.diameter == 1
    window = masks.describe_mask(masks.sliding_window_mask(7, 1))
    assert window.centers == tuple(range(7)) and window.radius == 3 and window.diameter == 6
    uni = masks.describe_mask(masks.causal_sliding_window_mask(7, 2))
    assert uni.centers == (0,) and uni.radius == 3 and uni.diameter == 3
    glob = masks.describe_mask(masks.global_window_mask(50, 1))
    assert glob.radius == 1 and 0 in glob.centers


def naive_hops(mask: torch.Tensor) -> list[list[int | None]]:
    """hops[s][t]: the fewest steps along information flow (j -> i where i attends to j) from s to t, by
    boolean matrix powers rather than the package's BFS (None: unreachable)."""
    n = mask.shape[0]
    flow = mask.T.to(torch.int64)  # flow[j, i] = 1: one step j -> i
    reach, hops = (torch.eye(n, dtype=torch.int64),
                   [[0 if s == t else None for t in range(n)] for s in range(n)])
    for step in range(1, n):
        # reachable in exactly `step` steps (self-loops: at most)
        reach = ((reach @ flow) > 0).to(torch.int64)
        for s, t in zip(*torch.nonzero(reach).T.tolist()):
            if hops[s][t] is None:
                hops[s][t] = step
    return hops


@pytest.mark.parametrize("mask", [masks.causal_mask(3), masks.causal_sliding_window_mask(4, 1),
                                  masks.sliding_window_mask(7, 2), masks.strided_mask(9, 3),
                                  masks.dilated_window_mask(8, 2, 2), masks.global_window_mask(10, 1),
                                  masks.random_mask(9, 0.2, seed=3), masks.self_mask(3)])
def test_centers_and_radius_follow_information_flow(mask):
    # centers and radius against a naive reachability by matrix powers, not the package's BFS
    hops = naive_hops(mask)
    centers = tuple(s for s, row in enumerate(hops) if None not in row)
    graph = masks.describe_mask(mask)
    assert graph.centers == centers
    assert graph.radius == min((max(hops[c]) for c in centers), default=None) == masks.graph_radius(mask)


def test_hop_distances_follow_information_flow():
    # token 0 is seen by everybody in the causal mask (one hop); a window of 1 passes it on one token a layer
    assert masks.describe_mask(masks.causal_mask(3)).centers == (0,)
    uni = masks.describe_mask(masks.causal_sliding_window_mask(4, 1))
    assert uni.centers == (0,) and uni.radius == 3 and uni.diameter == 3


def test_not_quasi_strongly_connected_mask_has_no_center():
    # two separate causal blocks: nobody reaches both
    block = torch.zeros(4, 4, dtype=torch.bool)
    block[:2, :2] = masks.causal_mask(2)
    block[2:, 2:] = masks.causal_mask(2)
    graph = masks.describe_mask(masks.mask_from_matrix(block))
    assert graph.centers == () and graph.radius is None and not graph.quasi_strongly_connected
    assert graph.diameter == 1
    assert masks.describe_mask(masks.mask_from_matrix(torch.zeros(3, 3, dtype=torch.bool))).centers == ()


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: masks.complete_mask(0), "n_tokens must be an integer >= 1"),
        (lambda: masks.sliding_window_mask(8, 0), r"window must be an integer in \[1, 7\]"),
        (lambda: masks.causal_sliding_window_mask(8, 8), r"window must be an integer in \[1, 7\]"),
        (lambda: masks.strided_mask(8, 9), r"stride must be an integer in \[1, 7\]"),
        (lambda: masks.dilated_window_mask(8, 1, 0), r"dilation must be an integer in \[1, 7\]"),
        (lambda: masks.global_window_mask(8, 1, n_global=8), r"n_global must be an integer in \[1, 7\]"),
        (lambda: masks.random_mask(8, 1.5, seed=0), r"density must be a number in \[0, 1\]"),
        (lambda: masks.mask_from_matrix(torch.ones(2, 3, dtype=torch.bool)), "matrix must be square"),
        (lambda: masks.mask_from_matrix(torch.ones(2, 2)), "matrix must be boolean"),
        (lambda: masks.build_mask("banded", 8, window=2), "mask name must be one of complete, causal"),
        (lambda: masks.build_mask("sliding_window", 8), "window must be given"),
    ],
)
def test_invalid_parameters_raise_one_clear_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()
