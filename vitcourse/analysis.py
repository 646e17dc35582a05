"""Looking inside a trained ViT (ViT paper, section 4.5 and Figure 7; notebook 07, rollout in 06).

- `attention_rollout`: Abnar & Zuidema, "Quantifying Attention Flow in Transformers" (2020).
  Attention in one layer says which tokens a token reads, but the residual connection also carries
  the token itself forward, and layers compose. Rollout averages the heads, adds the identity for
  the residual path, renormalises each row, and multiplies the layers together, giving how much
  each output token draws on each input token through the whole stack.
- `mean_attention_distance`: how far, in pixels, each head looks (Figure 7, right), and
  `attention_distance_references`: what that measure gives for a few heads known in advance.
- `position_embedding_similarity`: the learned position embeddings, compared on the grid
  (Figure 7, centre).
- `patch_embedding_filters`: principal components of the patch-embedding filters (Figure 7, left).
- `flops_per_image` (notebooks 08 and 09): the arithmetic of one image's forward pass, what a
  model costs in a race against the clock.
- `equivariance_error` (notebook 08): how far a layer is from translation equivariance, the
  built-in assumption of a convolution, with images moved by `roll` (wrap-around) or `shift` (a
  real shift, the background coming in); `shifted_accuracy`: a trained model's accuracy on
  shifted images; `token_map` lays a ViT's tokens back on the image's
  pixels, so the same measure applies to a ViT (section 3.1: *"In ViT, only MLP layers are local
  and translationally equivariant, while the self-attention layers are global."*).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch.utils.flop_counter import FlopCounterMode

from vitcourse.embedding import embed_tokens, position_similarity
from vitcourse.language import _


def attention_rollout(maps: torch.Tensor) -> torch.Tensor:
    """(layers, B, heads, T, T) attention weights -> (B, T, T) rolled-out attention.

    Row i of the result says how much token i at the top draws on each input token; rows sum to 1.
    """
    if maps.ndim != 5:
        raise ValueError(
            _("expected maps (layers, B, heads, T, T), got shape {shape}").format(
                shape=tuple(maps.shape)
            )
        )
    L, B, h, T, _keys = maps.shape
    identity = torch.eye(T, dtype=maps.dtype, device=maps.device)
    rollout = identity.expand(B, T, T)
    for layer in maps:  # (B, h, T, T), from the first block to the last
        a = layer.mean(dim=1) + identity  # average the heads; the residual path keeps each token
        a = a / a.sum(dim=-1, keepdim=True)  # rows sum to 1 again
        rollout = a @ rollout  # this layer reads what the layers below have mixed
    return rollout


def mean_attention_distance(maps: torch.Tensor, grid_size: int, token_pixels: int) -> torch.Tensor:
    """How far each head looks, in pixels: (layers, B, heads, T, T) -> (layers, heads).

    For every query patch, the distance from its centre to each key patch's centre, weighted by
    the attention between them, summed; then averaged over query patches and images (the ViT
    paper's Figure 7, right). Only patch tokens count: the cls token has no place on the grid, so
    each query's weights over the patches are renormalised to sum to 1. `token_pixels` is the
    distance in pixels between neighbouring tokens: pass `model.config.token_pixels` (the patch
    size for a pure ViT; 8 for `course-28/conv`, whose stem halves the image three times).
    """
    if maps.ndim != 5:
        raise ValueError(
            _("expected maps (layers, B, heads, T, T), got shape {shape}").format(
                shape=tuple(maps.shape)
            )
        )
    N = grid_size * grid_size
    if maps.shape[-1] != N + 1:
        raise ValueError(
            _(
                "maps have {tokens} tokens, but a {side}x{side} grid has {patches} patches plus the "
                "cls token"
            ).format(tokens=maps.shape[-1], side=grid_size, patches=N)
        )
    distance = _patch_distances(grid_size, token_pixels).to(maps)  # (N, N) pixels
    weights = maps[..., 1:, 1:]  # patch queries attending to patch keys: (L, B, h, N, N)
    weights = weights / weights.sum(dim=-1, keepdim=True).clamp(min=1e-12)
    per_query = (weights * distance).sum(dim=-1)  # (L, B, h, N)
    return per_query.mean(dim=(1, 3))  # average over images and query patches -> (L, h)


def attention_distance_references(grid_size: int, token_pixels: int) -> dict[str, float]:
    """The mean attention distance, in pixels, of three heads whose attention is known in advance.

    - "neighbours": each patch spreads its attention evenly over the patches at most one step
      away, itself included (its 3 x 3 neighbourhood, fewer at the edges): a local head that sees
      what a 3 x 3 convolution on the patch grid sees;
    - "even": each patch spreads its attention evenly over all patches;
    - "farthest": each patch puts all its attention on the patch farthest from it, the largest
      value `mean_attention_distance` can give on this grid.

    A head that attends only to itself scores 0. Same units as `mean_attention_distance`.
    """
    distance = _patch_distances(grid_size, token_pixels)  # (N, N)
    centres = _patch_centres(grid_size)
    steps = (centres[:, None] - centres[None]).abs().amax(dim=-1)  # (N, N) grid steps, diagonals 1
    near = (steps <= 1).float()
    return {
        "neighbours": ((distance * near).sum(dim=1) / near.sum(dim=1)).mean().item(),
        "even": distance.mean().item(),
        "farthest": distance.amax(dim=1).mean().item(),
    }


def _patch_centres(grid_size: int) -> torch.Tensor:
    """(N, 2) row and column of each patch, in the order of the tokens."""
    rows, cols = torch.meshgrid(torch.arange(grid_size), torch.arange(grid_size), indexing="ij")
    return torch.stack([rows.flatten(), cols.flatten()], dim=1).float()


def _patch_distances(grid_size: int, token_pixels: int) -> torch.Tensor:
    """(N, N) distances in pixels between the centres of every two patches."""
    centres = _patch_centres(grid_size) * token_pixels
    return torch.cdist(centres, centres)


def position_embedding_similarity(model) -> torch.Tensor:
    """Cosine similarity of each patch's position embedding with every other's: (g, g, g, g).

    Entry [r, c] is a g x g map for the patch at row r, column c (the ViT paper's Figure 7, centre).
    """
    return position_similarity(model.pos_embed)


def patch_embedding_filters(model, k: int = 16) -> torch.Tensor:
    """The top `k` principal components of the patch-embedding filters, as (k, C, P, P) images.

    Each of the D filters of `patch_embed.proj` is a small C x P x P image; their principal
    components show what kind of patterns the first layer looks for (the paper's Figure 7, left).
    """
    if getattr(model.config, "stem_channels", ()):
        raise ValueError(
            _(
                "this is a hybrid ViT: its patch embedding reads the convolution stem's {channels} "
                "feature maps, not pixels, so its filters are not images; expected a ViT without "
                "{option}"
            ).format(channels=model.config.stem_channels[-1], option="stem_channels")
        )
    weight = model.patch_embed.proj.weight.detach().float()  # (D, C, P, P)
    D, C, P, _width = weight.shape
    if not 1 <= k <= min(D, C * P * P):
        raise ValueError(
            _("k must be between 1 and {most}, got {k}").format(most=min(D, C * P * P), k=k)
        )
    flat = weight.reshape(D, C * P * P)
    flat = flat - flat.mean(dim=0, keepdim=True)  # principal components of the centred filters
    _u, _s, vh = torch.linalg.svd(flat, full_matrices=False)  # rows of vh: components, by variance
    return vh[:k].reshape(k, C, P, P)


def flops_per_image(model: torch.nn.Module) -> int:
    """Floating-point operations of one image's forward pass (a multiply-add is 2), counted by
    PyTorch (`torch.utils.flop_counter`). The model is put in evaluation mode; its `config` gives
    the image's size and channels."""
    c = model.config
    image = torch.zeros(1, c.in_channels, c.image_size, c.image_size, device=_device_of(model))
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model.eval()(image)
    return counter.get_total_flops()


def _device_of(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


def roll(images: torch.Tensor, pixels: int) -> torch.Tensor:
    """Move (..., H, W) images `pixels` columns to the right (negative: left), the columns that
    leave at one side coming back in at the other: `torch.roll`. Not a real shift: a whole-patch
    roll of a ViT's input only permutes its patches."""
    return torch.roll(images, shifts=pixels, dims=-1)


def shift(images: torch.Tensor, pixels: int, fill: float | Sequence[float] = 0.0) -> torch.Tensor:
    """Move (..., C, H, W) images `pixels` columns to the right (negative: left), as a camera
    would: the columns that leave are gone, and the ones that come in are `fill` (one number, or
    one per channel). Nothing wraps round.

    `fill` is the background. The course's images are normalised, so 0 is the mean pixel, not the
    background: for Fashion-MNIST and MNIST, whose background is black, pass the normalised black
    (`-mean / std` of each channel; notebook 08 does). CIFAR's photos have no background colour;
    black is a choice there too."""
    if images.ndim < 3:
        message = _("expected images (..., C, H, W), got shape {shape}")
        raise ValueError(message.format(shape=tuple(images.shape)))
    width, channels = images.shape[-1], images.shape[-3]
    background = torch.as_tensor(fill, dtype=images.dtype, device=images.device).flatten()
    if len(background) not in (1, channels):
        message = _("fill needs one number or one per channel ({channels}), got {count}")
        raise ValueError(message.format(channels=channels, count=len(background)))
    moved = torch.empty_like(images)
    moved[...] = background.view(-1, 1, 1)
    if abs(pixels) < width:  # what is left of the image, in its new place
        if pixels >= 0:
            moved[..., pixels:] = images[..., : width - pixels]
        else:
            moved[..., :pixels] = images[..., -pixels:]
    return moved


def equivariance_error(
    features: Callable[[torch.Tensor], torch.Tensor],
    image: torch.Tensor,
    shift: int,
    border: int,
    move: Callable[[torch.Tensor, int], torch.Tensor] = roll,
) -> float:
    """How far `features` is from translation equivariance on `image` (B, C, H, W).

    Move the image `shift` pixels to the right with `move` and compute its features, then compute
    the features first and move *them*: for an equivariant layer the two agree. `move` is `roll`
    (wrap-around, the default) or a real shift (`shift`, with the background coming in). The
    difference is measured away from `border` columns at each side (0: every column), where
    pixels wrapped round or came in, relative to the size of the features: with a real shift,
    take `border` at least the shift. `features` must keep the image's width (a convolution with
    padding does, and `token_map`).
    """
    width = image.shape[-1]
    if border < 0 or 2 * border >= width:
        raise ValueError(
            _("border must be between 0 and {most}, got {border}").format(
                most=(width - 1) // 2, border=border
            )
        )
    then_shift = move(features(image), shift)  # features, then shift
    shift_first = features(move(image, shift))  # shift, then features
    inner = (..., slice(border, width - border))  # columns away from the edges
    difference = (then_shift - shift_first)[inner].norm() / then_shift[inner].norm()
    return difference.item()


def shifted_accuracy(
    model: torch.nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    shifts: Sequence[int],
    *,
    fill: float | Sequence[float],
    batch_size: int = 500,
) -> list[float]:
    """The model's accuracy on `images` (B, C, H, W) with `labels` (B,), each image moved by
    `shift` (a real shift, `fill` coming in) for each of `shifts`: one accuracy per shift. `fill`
    is the background in the images' normalisation, and has no default: 0 is the mean pixel there
    (see `shift`)."""
    if images.ndim != 4 or labels.shape != images.shape[:1]:
        message = _(
            "expected images (B, C, H, W) and labels (B,), got shapes {images} and {labels}"
        )
        raise ValueError(message.format(images=tuple(images.shape), labels=tuple(labels.shape)))
    device = _device_of(model)
    was_training = model.training
    model.eval()
    accuracies = []
    with torch.no_grad():
        for pixels in shifts:
            right = 0
            for start in range(0, len(images), batch_size):
                batch = shift(images[start : start + batch_size], pixels, fill).to(device)
                guess = model(batch).argmax(dim=-1).cpu()
                right += (guess == labels[start : start + batch_size]).sum().item()
            accuracies.append(right / len(images))
    model.train(was_training)
    return accuracies


def token_map(model, images: torch.Tensor, blocks: bool = True, positions: bool = True):
    """A pure ViT's patch tokens laid back on the image: (B, C, H, W) -> (B, D, H, W).

    Each token is repeated over the P x P pixels of its patch, so a feature map of the image's
    width comes out and `equivariance_error` can shift it pixel by pixel, as for a convolution.
    `blocks=False`: the patch embedding's tokens only. `blocks=True`: the tokens after every block
    and the final norm (the cls token left out), with the position embeddings added, or, with
    `positions=False`, without them.
    """
    if model.config.stem_channels:
        raise ValueError(
            _("{function} needs a pure ViT: a hybrid's tokens do not sit on P x P patches").format(
                function="token_map"
            )
        )
    P, g = model.config.patch_size, model.patch_embed.grid_size
    x = model.patch_embed(model.check_images(images))  # (B, C, H, W) -> (B, N, D)
    if blocks:
        pos_embed = model.pos_embed if positions else torch.zeros_like(model.pos_embed)
        x = model.forward_features(embed_tokens(x, model.cls_token, pos_embed))[:, 1:]  # (B, N, D)
    B, N, D = x.shape
    grid = x.transpose(1, 2).reshape(B, D, g, g)  # (B, N, D) -> (B, D, H/P, W/P)
    return grid.repeat_interleave(P, dim=-2).repeat_interleave(P, dim=-1)  # -> (B, D, H, W)


def stage_map(cnn, images: torch.Tensor, stages: int) -> torch.Tensor:
    """A CNN's feature map after its first `stages` stages, laid back on the image's pixels:
    (B, C, H, W) -> (B, channels, H, W).

    After k stages the CNN's map has been halved k - 1 times (each stage after the first starts
    with a 2 x 2 max-pool), so each cell stands for a square of 2**(k-1) pixels: repeating it over
    them (and cutting what the last cells overhang) gives a map of the image's width that
    `equivariance_error` can shift pixel by pixel, as `token_map` does for a ViT's tokens."""
    if not 1 <= stages <= len(cnn.stages):
        message = _("stages must be between 1 and {most}, got {stages}")
        raise ValueError(message.format(most=len(cnn.stages), stages=stages))
    maps = cnn.stages[:stages](images)  # (B, widths[k-1], H / 2**(k-1), W / 2**(k-1)), rounded up
    stride = 2 ** (stages - 1)  # pixels per cell
    grown = maps.repeat_interleave(stride, dim=-2).repeat_interleave(stride, dim=-1)
    return grown[..., : images.shape[-2], : images.shape[-1]]
