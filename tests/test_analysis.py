"""vitcourse.analysis: each function on hand-made inputs whose answer is known."""

import dataclasses
import math

import pytest
import torch

from vitcourse.analysis import (
    attention_distance_references,
    attention_rollout,
    mean_attention_distance,
    patch_embedding_filters,
    position_embedding_similarity,
)
from vitcourse.embedding import position_similarity
from vitcourse.presets import PRESETS
from vitcourse.vit import VisionTransformer, ViTConfig


def maps_from(patch_weights: torch.Tensor, layers=1, batch=1, heads=1) -> torch.Tensor:
    """Wrap (N, N) patch-to-patch weights into (layers, B, heads, T, T) maps with a cls token."""
    N = patch_weights.shape[0]
    maps = torch.zeros(layers, batch, heads, N + 1, N + 1)
    maps[..., 0, 0] = 1.0  # the cls token attends to itself
    maps[..., 1:, 0] = 0.5  # half of each patch's attention on the cls token: renormalised away
    maps[..., 1:, 1:] = 0.5 * patch_weights
    return maps


def test_self_attention_is_distance_zero():
    maps = maps_from(torch.eye(9))
    assert mean_attention_distance(maps, grid_size=3, token_pixels=4).tolist() == [[0.0]]


def test_attending_to_the_right_neighbour_is_one_patch_away():
    g, P = 3, 7
    weights = torch.zeros(g * g, g * g)
    for r in range(g):
        for c in range(g):
            target = c + 1 if c + 1 < g else c - 1  # the right neighbour, or the left at the edge
            weights[r * g + c, r * g + target] = 1.0
    distance = mean_attention_distance(maps_from(weights), grid_size=g, token_pixels=P)
    assert distance.item() == pytest.approx(P)


def test_uniform_attention_is_the_mean_pairwise_distance():
    g, P = 4, 2
    cells = [(r, c) for r in range(g) for c in range(g)]
    expected = sum(P * math.dist(a, b) for a in cells for b in cells) / len(cells) ** 2
    uniform = torch.full((g * g, g * g), 1 / (g * g))
    distance = mean_attention_distance(maps_from(uniform, layers=2, batch=3, heads=2), g, P)
    assert distance.shape == (2, 2)
    torch.testing.assert_close(distance, torch.full((2, 2), expected))


def test_heads_are_kept_apart():
    near = torch.eye(4)
    far = torch.tensor([[0, 0, 0, 1], [0, 0, 1, 0], [0, 1, 0, 0], [1, 0, 0, 0]], dtype=torch.float)
    maps = torch.cat([maps_from(near), maps_from(far)], dim=2)  # head 0 local, head 1 diagonal
    distance = mean_attention_distance(maps, grid_size=2, token_pixels=10)
    torch.testing.assert_close(distance, torch.tensor([[0.0, 10 * math.sqrt(2)]]))


def test_attention_distance_references_worked_by_hand():
    # A 3x3 grid, patches 1 pixel apart: 4 corners, 4 edge patches and the centre.
    r2, r5 = math.sqrt(2), math.sqrt(5)
    neighbours = (4 * (2 + r2) / 4 + 4 * (3 + 2 * r2) / 6 + (4 + 4 * r2) / 9) / 9
    farthest = (4 * 2 * r2 + 4 * r5 + r2) / 9  # corner to corner, edge to a far corner, centre
    cells = [(r, c) for r in range(3) for c in range(3)]
    even = sum(math.dist(a, b) for a in cells for b in cells) / 81
    got = attention_distance_references(grid_size=3, token_pixels=1)
    assert got == pytest.approx({"neighbours": neighbours, "even": even, "farthest": farthest})
    scaled = attention_distance_references(grid_size=3, token_pixels=7)  # pixels scale with P
    assert scaled == pytest.approx({k: 7 * v for k, v in got.items()})


@pytest.mark.parametrize("g", [2, 4, 7])
def test_attention_distance_references_agree_with_the_measure(g):
    # The heads the references describe, written as attention maps and measured.
    cells = torch.tensor([(r, c) for r in range(g) for c in range(g)], dtype=torch.float)
    distance = torch.cdist(cells, cells)
    steps = (cells[:, None] - cells[None]).abs().amax(dim=-1)
    near = (steps <= 1).float()
    farthest = torch.zeros(g * g, g * g)
    farthest[torch.arange(g * g), distance.argmax(dim=1)] = 1.0
    heads = [near / near.sum(1, keepdim=True), torch.full((g * g, g * g), 1 / g**2), farthest]
    maps = torch.cat([maps_from(w) for w in heads], dim=2)  # (1, 1, 3 heads, T, T)
    measured = mean_attention_distance(maps, grid_size=g, token_pixels=3)[0]
    references = attention_distance_references(grid_size=g, token_pixels=3)
    assert measured.tolist() == pytest.approx(
        [references["neighbours"], references["even"], references["farthest"]], rel=1e-5
    )
    assert 0 < references["neighbours"] <= references["even"] < references["farthest"]


def test_mean_attention_distance_guards():
    with pytest.raises(ValueError, match="a 3x3 grid has 9 patches plus the cls token"):
        mean_attention_distance(torch.rand(1, 1, 1, 5, 5), grid_size=3, token_pixels=4)
    with pytest.raises(ValueError, match=r"expected maps \(layers, B, heads, T, T\)"):
        mean_attention_distance(torch.rand(5, 5), grid_size=2, token_pixels=4)


def test_position_embedding_similarity_reads_the_model():
    model = VisionTransformer(
        ViTConfig(
            image_size=16,
            patch_size=4,
            in_channels=1,
            num_classes=2,
            dim=16,
            depth=1,
            num_heads=2,
            mlp_dim=16,
        )
    )
    sim = position_embedding_similarity(model)
    assert sim.shape == (4, 4, 4, 4)
    torch.testing.assert_close(sim, position_similarity(model.pos_embed))
    torch.testing.assert_close(torch.diagonal(sim.reshape(16, 16)), torch.ones(16))


def test_patch_embedding_filters_find_the_dominant_pattern():
    torch.manual_seed(0)
    model = VisionTransformer(
        ViTConfig(
            image_size=16,
            patch_size=4,
            in_channels=3,
            num_classes=2,
            dim=32,
            depth=1,
            num_heads=2,
            mlp_dim=16,
        )
    )
    pattern = torch.randn(3, 4, 4)
    pattern /= pattern.norm()
    strengths = torch.randn(32, 1, 1, 1) * 5
    with torch.no_grad():  # every filter: a multiple of one pattern, plus a little noise
        model.patch_embed.proj.weight.copy_(strengths * pattern + 0.01 * torch.randn(32, 3, 4, 4))
    filters = patch_embedding_filters(model, k=5)
    assert filters.shape == (5, 3, 4, 4)
    assert abs(torch.dot(filters[0].flatten(), pattern.flatten())).item() > 0.99
    gram = filters.flatten(1) @ filters.flatten(1).T
    torch.testing.assert_close(gram, torch.eye(5), atol=1e-5, rtol=0)  # orthonormal components
    with pytest.raises(ValueError, match="k must be between 1 and 32, got 33"):
        patch_embedding_filters(model, k=33)
    hybrid = VisionTransformer(dataclasses.replace(model.config, stem_channels=(8,)))
    with pytest.raises(ValueError, match="hybrid ViT: .* 8 feature maps, not pixels"):
        patch_embedding_filters(hybrid)


def test_rollout_of_identity_attention_is_identity():
    maps = torch.eye(5).expand(3, 2, 4, 5, 5)  # every token attends only to itself
    torch.testing.assert_close(attention_rollout(maps), torch.eye(5).expand(2, 5, 5))


def test_rollout_worked_by_hand():
    # One layer, two heads: their mean is uniform over 2 tokens; with the residual,
    # A = (U + I) / 2 = [[0.75, 0.25], [0.25, 0.75]].
    heads = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [1.0, 0.0]]])
    one = attention_rollout(heads[None, None])
    a = torch.tensor([[0.75, 0.25], [0.25, 0.75]])
    torch.testing.assert_close(one[0], a)
    two = attention_rollout(heads[None, None].expand(2, 1, 2, 2, 2))
    torch.testing.assert_close(two[0], a @ a)  # layers multiply
    torch.testing.assert_close(two.sum(-1), torch.ones(1, 2))


def test_rollout_order_matters():
    first = torch.tensor([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])  # all read token 0
    second = torch.tensor([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])  # token 0 reads 2
    maps = torch.stack([first, second])[:, None, None]  # (L=2, B=1, h=1, 3, 3)
    a1 = (first + torch.eye(3)) / (first + torch.eye(3)).sum(-1, keepdim=True)
    a2 = (second + torch.eye(3)) / (second + torch.eye(3)).sum(-1, keepdim=True)
    torch.testing.assert_close(attention_rollout(maps)[0], a2 @ a1)
    with pytest.raises(ValueError, match=r"expected maps \(layers, B, heads, T, T\)"):
        attention_rollout(torch.rand(2, 3, 3))


def test_attention_distance_of_a_hybrid_counts_stem_cells_in_pixels():
    """course-28/conv's 4 x 4 grid: neighbouring tokens are 8 pixels apart on the image, not 1."""
    config = PRESETS["course-28/conv"]
    g = config.grid_size
    weights = torch.zeros(g * g, g * g)
    for i in range(g * g):  # every patch attends to its right neighbour (or itself at the edge)
        weights[i, i + 1 if (i + 1) % g else i] = 1.0
    distance = mean_attention_distance(maps_from(weights), g, config.token_pixels)
    share_moving = (g - 1) / g  # the last column has no right neighbour
    assert distance.item() == pytest.approx(8 * share_moving)


def test_equivariance_error_tells_a_convolution_from_a_position_pattern():
    from vitcourse.analysis import equivariance_error

    torch.manual_seed(0)
    conv = torch.nn.Conv2d(1, 3, 3, padding=1)
    image = torch.rand(1, 1, 12, 16)
    with torch.no_grad():
        assert equivariance_error(conv, image, shift=3, border=4) < 1e-6  # a convolution
        pattern = torch.randn(1, 3, 12, 16)
        assert equivariance_error(lambda x: conv(x) + pattern, image, 3, 4) > 0.1  # positions
        # border 0 keeps every column: a circular convolution is equivariant to a wrapped shift
        # there too, and a zero-padded one is not (the wrapped edge meets its padding)
        circular = torch.nn.Conv2d(1, 3, 3, padding=1, padding_mode="circular")
        assert equivariance_error(circular, image, 3, border=0) < 1e-6
        assert equivariance_error(conv, image, 3, border=0) > 1e-3
    with pytest.raises(ValueError, match="border must be between 0 and 7, got 8"):
        equivariance_error(conv, image, 3, 8)
    with pytest.raises(ValueError, match="border must be between 0 and 7, got -1"):
        equivariance_error(conv, image, 3, -1)


def _tiny_vit(**changes):
    config = ViTConfig(
        image_size=12, patch_size=4, dim=16, depth=2, num_heads=2, mlp_dim=32, **changes
    )
    torch.manual_seed(0)
    model = VisionTransformer(config).eval()
    with torch.no_grad():  # positions as big as a trained model's, so that they show
        model.pos_embed.normal_()
    return model


def test_token_map_lays_each_token_over_its_patch():
    from vitcourse.analysis import token_map

    model = _tiny_vit()
    image = torch.rand(2, 3, 12, 12)
    with torch.no_grad():
        grid = token_map(model, image, blocks=False)  # (B, D, H, W)
        tokens = model.patch_embed(image)  # (B, N, D), reading order
    assert grid.shape == (2, 16, 12, 12)
    for n in range(9):  # patch n sits at row n // 3, column n % 3 of the 3 x 3 grid
        row, col = divmod(n, 3)
        patch = grid[:, :, 4 * row : 4 * row + 4, 4 * col : 4 * col + 4]  # (B, D, 4, 4)
        assert torch.equal(patch, tokens[:, n, :, None, None].expand_as(patch))


def test_a_vit_is_equivariant_to_whole_patch_shifts_until_positions_are_added():
    """Section 3.1, measured: the patch embedding and the blocks move their tokens with a shift
    by a whole patch; a shift by less than a patch, or the position embeddings, break that."""
    from vitcourse.analysis import equivariance_error, token_map

    model = _tiny_vit()
    image = torch.rand(1, 3, 12, 12)
    patch = lambda x: token_map(model, x, blocks=False)  # noqa: E731
    no_positions = lambda x: token_map(model, x, positions=False)  # noqa: E731
    positions = lambda x: token_map(model, x)  # noqa: E731
    with torch.no_grad():
        for features in (patch, no_positions):
            assert equivariance_error(features, image, shift=4, border=5) < 1e-5  # one patch
            assert equivariance_error(features, image, shift=3, border=5) > 0.05  # less
        assert equivariance_error(positions, image, shift=4, border=5) > 0.05


def test_token_map_refuses_a_hybrid():
    from vitcourse.analysis import token_map

    model = _tiny_vit(stem_channels=(8,))
    with pytest.raises(ValueError, match="needs a pure ViT"):
        token_map(model, torch.rand(1, 3, 12, 12))


def test_a_real_shift_lets_the_background_in_and_wraps_nothing_round():
    from vitcourse.analysis import roll, shift

    images = torch.arange(2 * 2 * 3 * 5, dtype=torch.float).view(2, 2, 3, 5)
    right = shift(images, 2, fill=[-1.0, -2.0])  # one background per channel
    assert torch.equal(right[..., 2:], images[..., :3])  # what stays, in its new place
    assert (right[:, 0, :, :2] == -1).all() and (right[:, 1, :, :2] == -2).all()
    left = shift(images, -1)  # negative: to the left, fill 0 by default
    assert torch.equal(left[..., :4], images[..., 1:]) and (left[..., 4] == 0).all()
    assert torch.equal(shift(images, 0), images) and (shift(images, 5, fill=7.0) == 7).all()
    assert torch.equal(roll(images, 2)[..., :2], images[..., 3:])  # roll: the right edge wraps
    assert torch.equal(shift(images[0], 1)[..., 1:], images[0, ..., :4])  # one (C, H, W) image
    with pytest.raises(ValueError, match=r"expected images \(..., C, H, W\), got shape \(3, 5\)"):
        shift(images[0, 0], 1)
    with pytest.raises(ValueError, match=r"one number or one per channel \(2\), got 3"):
        shift(images, 1, fill=[0.0, 1.0, 2.0])


def test_a_convolution_stays_equivariant_to_a_real_shift_away_from_the_edges():
    """A real shift changes what comes in at one edge and what leaves at the other; a convolution
    still moves its features with the image everywhere else. A whole-patch real shift is no
    longer a permutation of a ViT's tokens: attention spreads the new edge to every token."""
    from vitcourse.analysis import equivariance_error, shift, token_map

    torch.manual_seed(0)
    conv = torch.nn.Conv2d(1, 3, 3, padding=1)
    image = torch.rand(1, 1, 12, 16)
    real = lambda x, pixels: shift(x, pixels, fill=0.3)  # noqa: E731
    model = _tiny_vit()
    vit_image = torch.rand(1, 3, 12, 12)
    no_positions = lambda x: token_map(model, x, positions=False)  # noqa: E731
    with torch.no_grad():
        assert equivariance_error(conv, image, 3, border=4, move=real) < 1e-6
        assert equivariance_error(conv, image, 3, border=2, move=real) > 1e-3  # the edge counts
        assert equivariance_error(no_positions, vit_image, 4, border=5) < 1e-5  # wrapped
        assert equivariance_error(no_positions, vit_image, 4, border=5, move=real) > 1e-3


def test_stage_map_lays_each_cell_over_its_pixels_and_is_exact_on_the_stride_grid():
    from vitcourse.analysis import equivariance_error, shift, stage_map
    from vitcourse.cnn import CNNConfig, SmallCNN

    torch.manual_seed(0)
    cnn = SmallCNN(CNNConfig(image_size=20, widths=(4, 6, 8), depths=(1, 1, 1))).eval()
    image = torch.rand(1, 1, 20, 20)
    with torch.no_grad():
        cells = cnn.stages[:3](image)  # (1, 8, 5, 5): halved twice, each cell 4 x 4 pixels
        grown = stage_map(cnn, image, 3)
        assert grown.shape == (1, 8, 20, 20)
        assert torch.equal(grown[..., 4:8, 8:12], cells[..., 1:2, 2:3].expand(1, 8, 4, 4))
        assert torch.equal(stage_map(cnn, image, 1), cnn.stages[0](image))  # no pooling yet
        # after one pool: on its grid (even shifts) nearly exact, off it (odd shifts) not
        two = lambda x: stage_map(cnn, x, 2)  # noqa: E731
        real = lambda x, pixels: shift(x, pixels)  # noqa: E731
        assert equivariance_error(two, image, 2, border=6, move=real) < 1e-6
        assert equivariance_error(two, image, 1, border=6, move=real) > 0.05
    with pytest.raises(ValueError, match="stages must be between 1 and 3, got 4"):
        stage_map(cnn, image, 4)


def test_shifted_accuracy_is_the_accuracy_on_the_shifted_images():
    from vitcourse.analysis import shift, shifted_accuracy

    class LeftOrRight(torch.nn.Module):  # class 1 when the bright pixel is in the right half
        def __init__(self):
            super().__init__()
            self.unused = torch.nn.Linear(1, 1)  # a parameter, for the device

        def forward(self, x):
            right = x[..., 5:].sum(dim=(-3, -2, -1)) > x[..., :5].sum(dim=(-3, -2, -1))
            return torch.stack([~right, right], dim=-1).float()

    images = torch.zeros(4, 1, 2, 10)
    for b, column in enumerate((1, 3, 6, 8)):
        images[b, 0, 0, column] = 1.0
    labels = torch.tensor([0, 0, 1, 1])
    model = LeftOrRight().train()
    accuracies = shifted_accuracy(model, images, labels, [0, 1, 2, -4], fill=0.0, batch_size=3)
    expected = []
    for pixels in (0, 1, 2, -4):
        guess = model(shift(images, pixels)).argmax(-1)
        expected.append((guess == labels).float().mean().item())
    assert accuracies == expected == [1.0, 1.0, 0.5, 0.5]  # two bright pixels leave at 2
    assert model.training  # left as it was
    with pytest.raises(ValueError, match=r"labels \(B,\), got shapes \(4, 1, 2, 10\) and \(3,\)"):
        shifted_accuracy(model, images, labels[:3], [0], fill=0.0)


def test_flops_per_image_counts_a_multiply_add_as_two_and_leaves_the_model_in_eval():
    from vitcourse.analysis import flops_per_image
    from vitcourse.mlp import MLPConfig, SmallMLP

    mlp = SmallMLP(MLPConfig(image_size=4, in_channels=2, num_classes=3, widths=(5,))).train()
    assert flops_per_image(mlp) == 2 * (32 * 5 + 5 * 3)  # two matrix products, biases not counted
    assert not mlp.training
    conv = _tiny_vit()  # a ViT's patch embedding is a convolution: counted too
    assert flops_per_image(conv) > 2 * 9 * 48 * 16  # at least the patch embedding's products
