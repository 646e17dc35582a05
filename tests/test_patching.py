"""vitcourse.patching: patchify and unpatchify, shapes, order, guards and the patch-grid drawing."""

import pytest
import torch

from vitcourse.patching import draw_patch_grid, patchify, unpatchify

# --- patching ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "C, H, W, P", [(1, 28, 28, 4), (3, 32, 32, 8), (3, 12, 20, 4), (2, 6, 6, 6)]
)
def test_patchify_shapes_and_round_trip(C, H, W, P):
    images = torch.randn(2, C, H, W)
    patches = patchify(images, P)
    assert patches.shape == (2, (H // P) * (W // P), P * P * C)
    assert torch.equal(unpatchify(patches, P, (H, W)), images)


def test_patches_are_walked_row_by_row_and_hold_their_pixels():
    images = torch.arange(2 * 3 * 8 * 12, dtype=torch.float32).reshape(2, 3, 8, 12)
    patches = patchify(images, 4)  # a 2 x 3 grid of patches
    for n in range(6):
        row, col = divmod(n, 3)  # reading order: left to right, then the next row
        block = images[:, :, 4 * row : 4 * row + 4, 4 * col : 4 * col + 4]  # (B, C, P, P)
        assert torch.equal(patches[:, n], block.permute(0, 2, 3, 1).reshape(2, -1))


def test_patchify_rejects_sizes_that_do_not_divide():
    with pytest.raises(ValueError, match="image height 30 is not a multiple of patch size 4"):
        patchify(torch.zeros(1, 1, 30, 28), 4)
    with pytest.raises(ValueError, match="image width 30 is not a multiple of patch size 4"):
        patchify(torch.zeros(1, 1, 28, 30), 4)
    with pytest.raises(
        ValueError, match=r"expected a batch of images \(B, C, H, W\), got shape \(28, 28\)"
    ):
        patchify(torch.zeros(28, 28), 4)


def test_unpatchify_square_default_and_errors():
    images = torch.randn(1, 3, 16, 16)
    assert torch.equal(unpatchify(patchify(images, 4), 4), images)
    with pytest.raises(ValueError, match="do not make a square grid"):
        unpatchify(torch.zeros(1, 6, 48), 4)
    with pytest.raises(ValueError, match="do not tile a 16x16 image"):
        unpatchify(torch.zeros(1, 9, 48), 4, 16)


def test_draw_patch_grid_draws_every_line_and_number():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    draw_patch_grid(torch.rand(1, 28, 28), 7, ax=ax)
    assert len(ax.lines) == 5 + 5  # 4 patches a side: 5 vertical and 5 horizontal lines
    assert [t.get_text() for t in ax.texts] == [str(n) for n in range(16)]
    plt.close(fig)
