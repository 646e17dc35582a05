"""Realistic wrong first attempts at the course's 17 exercises, written the way learners write them.

Each is `Attempt(exercise, what, code, says)`: `code` is the learner's function or class, `says` a
piece of the hint (or message) its check should give, in English. None of them is right, so none
may pass: `tests/checks/test_registry_attempts.py` runs them all, and `benchmarks/check_attempts.py` counts
how many each check catches (a wrong answer caught with a message, or an error explained), for
the closing notes of a change to the checks.

They are not copied from the checks' own lists of mistakes: each is code a learner could type,
with the slips seen when learners try (an argument ignored, the caller's tensor changed in place,
a mode switched inside a step, an edge value, a branch half written).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from vitcourse.analysis import roll
from vitcourse.attention import MultiHeadSelfAttention
from vitcourse.block import MLP, TransformerBlock
from vitcourse.embedding import PatchEmbedding, embed_tokens
from vitcourse.patching import patchify as reference_patchify
from vitcourse.patching import unpatchify as reference_unpatchify


@dataclass(frozen=True)
class Attempt:
    exercise: str
    what: str  # the slip, in a few words
    code: object
    says: str = ""  # a piece of what the check should say ("" : any wrong or error verdict)


ATTEMPTS: list[Attempt] = []


def attempt(exercise: str, what: str, says: str = ""):
    def add(code):
        ATTEMPTS.append(Attempt(exercise, what, code, says))
        return code

    return add


# --- 01 patchify ----------------------------------------------------------------------------------


@attempt("patchify", "a plain reshape", "a plain reshape does not cut out squares")
def patchify_reshape(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    return images.reshape(B, (H // P) * (W // P), P * P * C)


@attempt("patchify", "patches column by column", "column by column")
def patchify_columns(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 4, 2, 3, 5, 1)
    return x.reshape(B, -1, P * P * C)


@attempt("patchify", "channels first inside a patch", "channel last")
def patchify_channels_first(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.unfold(2, P, P).unfold(3, P, P)  # (B, C, H/P, W/P, P, P)
    return x.permute(0, 2, 3, 1, 4, 5).reshape(B, -1, C * P * P)


@attempt("patchify", "pixels read column by column", "column by column; read them row by row")
def patchify_pixel_columns(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 5, 3, 1)
    return x.reshape(B, -1, P * P * C)


@attempt("patchify", "the patch size written in", "patch_size")
def patchify_fixed_size(images, patch_size):
    B, C, H, W = images.shape
    P = 4  # the size used in the examples
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(B, (H // P) * (W // P), P * P * C)


@attempt("patchify", "a square grid assumed", "not square")
def patchify_square(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    n = H // P
    x = images.reshape(B, C, n, P, n, P).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(B, n * n, P * P * C)


@attempt("patchify", "(B, K, N) returned", "the last two axes are swapped")
def patchify_swapped(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(B, -1, P * P * C).transpose(1, 2)


# --- 01 unpatchify --------------------------------------------------------------------------------


@attempt("unpatchify", "a plain reshape", "a plain reshape does not put the squares back")
def unpatchify_reshape(patches, patch_size, image_size):
    B, N, K = patches.shape
    H, W = image_size
    return patches.reshape(B, K // (patch_size**2), H, W)


@attempt("unpatchify", "height and width swapped", "the height first")
def unpatchify_hw_swapped(patches, patch_size, image_size):
    B, N, K = patches.shape
    P = patch_size
    W, H = image_size
    C = K // (P * P)
    x = patches.reshape(B, H // P, W // P, P, P, C).permute(0, 5, 1, 3, 2, 4)
    return x.reshape(B, C, H, W)


@attempt("unpatchify", "grid and pixel axes interleaved the wrong way", "each grid axis")
def unpatchify_interleaved(patches, patch_size, image_size):
    B, N, K = patches.shape
    P = patch_size
    H, W = image_size
    C = K // (P * P)
    x = patches.reshape(B, H // P, W // P, P, P, C).permute(0, 5, 3, 1, 4, 2)
    return x.reshape(B, C, H, W)


@attempt("unpatchify", "channels first inside a patch", "channel last")
def unpatchify_channels_first(patches, patch_size, image_size):
    B, N, K = patches.shape
    P = patch_size
    H, W = image_size
    C = K // (P * P)
    x = patches.reshape(B, H // P, W // P, C, P, P).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(B, C, H, W)


@attempt("unpatchify", "the grid filled column by column", "column by column")
def unpatchify_columns(patches, patch_size, image_size):
    B, N, K = patches.shape
    P = patch_size
    H, W = image_size
    C = K // (P * P)
    x = patches.reshape(B, W // P, H // P, P, P, C).permute(0, 5, 2, 3, 1, 4)
    return x.reshape(B, C, H, W)


@attempt("unpatchify", "the patch size written in", "patch_size")
def unpatchify_fixed_size(patches, patch_size, image_size):
    B, N, K = patches.shape
    P = 4
    H, W = image_size
    C = K // (P * P)
    x = patches.reshape(B, H // P, W // P, P, P, C).permute(0, 5, 1, 3, 2, 4)
    return x.reshape(B, C, H, W)


@attempt("unpatchify", "a square image assumed", "not square")
def unpatchify_square(patches, patch_size, image_size):
    B, N, K = patches.shape
    P = patch_size
    side = int(N**0.5)
    C = K // (P * P)
    x = patches.reshape(B, side, side, P, P, C).permute(0, 5, 1, 3, 2, 4)
    return x.reshape(B, C, side * P, side * P)


# --- 02 PatchEmbedding ----------------------------------------------------------------------------


def _patch_embedding(forward):
    class Learner(nn.Module):
        def __init__(self, image_size, patch_size, in_channels, dim):
            super().__init__()
            self.proj = nn.Conv2d(in_channels, dim, kernel_size=patch_size, stride=patch_size)

        def forward(self, images):
            return forward(self, images)

    return Learner


def _pe_reshape(self, images):
    x = self.proj(images)
    return x.reshape(x.shape[0], -1, x.shape[1])


def _pe_columns(self, images):
    x = self.proj(images)
    return x.transpose(2, 3).flatten(2).transpose(1, 2)


def _pe_no_transpose(self, images):
    return self.proj(images).flatten(2)


def _pe_grid(self, images):
    return self.proj(images)


def _pe_fixed(self, images):
    x = self.proj(images)
    return x.flatten(2).transpose(1, 2).reshape(2, 16, 8)


attempt("PatchEmbedding", "a reshape where a transpose is needed", "swap the two axes")(
    _patch_embedding(_pe_reshape)
)
attempt("PatchEmbedding", "the grid flattened column by column", "column by column")(
    _patch_embedding(_pe_columns)
)
attempt("PatchEmbedding", "(B, D, N) returned", "that is (B, D, N)")(
    _patch_embedding(_pe_no_transpose)
)
attempt("PatchEmbedding", "the convolution's grid returned", "merge the grid")(
    _patch_embedding(_pe_grid)
)
attempt("PatchEmbedding", "the sizes of the example written in")(_patch_embedding(_pe_fixed))


# --- 02 embed_tokens ------------------------------------------------------------------------------


@attempt("embed_tokens", "the cls token after the patches", "in front")
def embed_cls_last(patch_tokens, cls_token, pos_embed):
    cls = cls_token.expand(patch_tokens.shape[0], -1, -1)
    return torch.cat([patch_tokens, cls], dim=1) + pos_embed


@attempt("embed_tokens", "no positions", "position embeddings are missing")
def embed_no_positions(patch_tokens, cls_token, pos_embed):
    cls = cls_token.expand(patch_tokens.shape[0], -1, -1)
    return torch.cat([cls, patch_tokens], dim=1)


@attempt("embed_tokens", "no position for the cls token", "position embedding 0")
def embed_cls_unplaced(patch_tokens, cls_token, pos_embed):
    cls = cls_token.expand(patch_tokens.shape[0], -1, -1)
    return torch.cat([cls, patch_tokens + pos_embed[:, 1:]], dim=1)


@attempt("embed_tokens", "the caller's patch tokens changed in place", "in place")
def embed_in_place(patch_tokens, cls_token, pos_embed):
    patch_tokens += pos_embed[:, 1:]
    cls = (cls_token + pos_embed[:, :1]).expand(patch_tokens.shape[0], -1, -1)
    return torch.cat([cls, patch_tokens], dim=1)


@attempt("embed_tokens", "the cls token not expanded", "its own view of the cls token")
def embed_unexpanded(patch_tokens, cls_token, pos_embed):
    return torch.cat([cls_token, patch_tokens], dim=1) + pos_embed


@attempt("embed_tokens", "the cls token added, not joined", "extra token in front")
def embed_added(patch_tokens, cls_token, pos_embed):
    return patch_tokens + cls_token + pos_embed[:, 1:]


# --- 03 attention ---------------------------------------------------------------------------------


@attempt("attention", "no scaling", "not scaled")
def attention_unscaled(q, k, v):
    weights = (q @ k.transpose(-2, -1)).softmax(-1)
    return weights @ v, weights


@attempt("attention", "divided by d", "not by d")
def attention_by_d(q, k, v):
    weights = (q @ k.transpose(-2, -1) / q.shape[-1]).softmax(-1)
    return weights @ v, weights


@attempt("attention", "the softmax over the queries", "wrong axis")
def attention_softmax_queries(q, k, v):
    weights = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(dim=-2)
    return weights @ v, weights


@attempt("attention", "k.T on a batch of heads", ".T")
def attention_dot_t(q, k, v):
    weights = (q @ k.T / math.sqrt(q.shape[-1])).softmax(-1)
    return weights @ v, weights


@attempt("attention", "(weights, out) returned", "wrong order")
def attention_swapped(q, k, v):
    weights = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(-1)
    return weights, weights @ v


@attempt("attention", "√d of the example written in", "take d from q's last axis")
def attention_fixed_d(q, k, v):
    weights = (q @ k.transpose(-2, -1) / math.sqrt(8)).softmax(-1)
    return weights @ v, weights


@attempt("attention", "scaled by √T", "√T")
def attention_by_t(q, k, v):
    weights = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-2])).softmax(-1)
    return weights @ v, weights


@attempt("attention", "the caller's queries scaled in place", "in place")
def attention_in_place(q, k, v):
    q /= math.sqrt(q.shape[-1])
    weights = (q @ k.transpose(-2, -1)).softmax(-1)
    return weights @ v, weights


@attempt("attention", "the weights returned transposed", "weights are transposed")
def attention_weights_transposed(q, k, v):
    weights = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(-1)
    return weights @ v, weights.transpose(-2, -1)


# --- 03 MultiHeadSelfAttention --------------------------------------------------------------------


def _mhsa(forward):
    class Learner(nn.Module):
        def __init__(self, dim, num_heads):
            super().__init__()
            self.num_heads = num_heads
            self.head_dim = dim // num_heads
            self.qkv = nn.Linear(dim, 3 * dim)
            self.proj = nn.Linear(dim, dim)

        def forward(self, x):
            return forward(self, x)

    return Learner


def _attend(q, k, v, scale):
    return ((q @ k.transpose(-2, -1)) / scale).softmax(-1) @ v


def _mhsa_naive(self, x):
    B, T, D = x.shape
    q, k, v = self.qkv(x).chunk(3, dim=-1)
    q, k, v = (t.reshape(B, self.num_heads, T, self.head_dim) for t in (q, k, v))
    out = _attend(q, k, v, math.sqrt(self.head_dim))
    return self.proj(out.reshape(B, T, D))


def _mhsa_no_proj(self, x):
    B, T, D = x.shape
    h, d = self.num_heads, self.head_dim
    q, k, v = self.qkv(x).reshape(B, T, 3, h, d).permute(2, 0, 3, 1, 4)
    return _attend(q, k, v, math.sqrt(d)).transpose(1, 2).reshape(B, T, D)


def _mhsa_merge(self, x):
    B, T, D = x.shape
    h, d = self.num_heads, self.head_dim
    q, k, v = self.qkv(x).reshape(B, T, 3, h, d).permute(2, 0, 3, 1, 4)
    return self.proj(_attend(q, k, v, math.sqrt(d)).reshape(B, T, D))


def _mhsa_sqrt_big_d(self, x):
    B, T, D = x.shape
    h, d = self.num_heads, self.head_dim
    q, k, v = self.qkv(x).reshape(B, T, 3, h, d).permute(2, 0, 3, 1, 4)
    return self.proj(_attend(q, k, v, math.sqrt(D)).transpose(1, 2).reshape(B, T, D))


def _mhsa_h3d(self, x):
    B, T, D = x.shape
    h, d = self.num_heads, self.head_dim
    q, k, v = self.qkv(x).reshape(B, T, h, 3, d).permute(3, 0, 2, 1, 4)
    return self.proj(_attend(q, k, v, math.sqrt(d)).transpose(1, 2).reshape(B, T, D))


def _mhsa_fixed_heads(self, x):
    B, T, D = x.shape
    h, d = 3, D // 3  # the example's three heads
    q, k, v = self.qkv(x).reshape(B, T, 3, h, d).permute(2, 0, 3, 1, 4)
    return self.proj(_attend(q, k, v, math.sqrt(d)).transpose(1, 2).reshape(B, T, D))


def _mhsa_sqrt_t(self, x):
    B, T, D = x.shape
    h, d = self.num_heads, self.head_dim
    q, k, v = self.qkv(x).reshape(B, T, 3, h, d).permute(2, 0, 3, 1, 4)
    return self.proj(_attend(q, k, v, math.sqrt(T)).transpose(1, 2).reshape(B, T, D))


attempt("MultiHeadSelfAttention", "heads split by a reshape alone", "without moving the head axis")(
    _mhsa(_mhsa_naive)
)
attempt("MultiHeadSelfAttention", "no output projection", "output projection is missing")(
    _mhsa(_mhsa_no_proj)
)
attempt(
    "MultiHeadSelfAttention", "heads merged without the transpose", "moving the head axis back"
)(_mhsa(_mhsa_merge))
attempt("MultiHeadSelfAttention", "scaled by √D", "not by √D")(_mhsa(_mhsa_sqrt_big_d))
attempt("MultiHeadSelfAttention", "qkv read as (h, 3, d)", "(3, h, d)")(_mhsa(_mhsa_h3d))
attempt("MultiHeadSelfAttention", "the example's 3 heads written in", "num_heads")(
    _mhsa(_mhsa_fixed_heads)
)
attempt("MultiHeadSelfAttention", "scaled by √T", "√T")(_mhsa(_mhsa_sqrt_t))


# --- 04 layer_norm --------------------------------------------------------------------------------


@attempt("layer_norm", "the sample variance", "population variance")
def ln_sample_variance(x, weight, bias, eps=1e-6):
    return (x - x.mean(-1, keepdim=True)) / torch.sqrt(
        x.var(-1, keepdim=True) + eps
    ) * weight + bias


@attempt("layer_norm", "normalised across tokens", "over its D features")
def ln_across_tokens(x, weight, bias, eps=1e-6):
    mean = x.mean(1, keepdim=True)
    var = x.var(1, keepdim=True, unbiased=False)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


@attempt("layer_norm", "no gain and offset", "scale by weight and shift by bias")
def ln_no_affine(x, weight, bias, eps=1e-6):
    mean = x.mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + eps)


@attempt("layer_norm", "eps written in as nn.LayerNorm's default", "eps")
def ln_fixed_eps(x, weight, bias, eps=1e-6):
    return F.layer_norm(x, x.shape[-1:], weight, bias, 1e-5)


@attempt("layer_norm", "eps outside the square root", "inside the square root")
def ln_eps_outside(x, weight, bias, eps=1e-6):
    mean = x.mean(-1, keepdim=True)
    std = x.var(-1, keepdim=True, unbiased=False).sqrt()
    return (x - mean) / (std + eps) * weight + bias


@attempt("layer_norm", "the caller's x centred in place", "in place")
def ln_in_place(x, weight, bias, eps=1e-6):
    x -= x.mean(-1, keepdim=True)
    return x / torch.sqrt((x**2).mean(-1, keepdim=True) + eps) * weight + bias


@attempt("layer_norm", "the mean without keepdim", "lost that axis")
def ln_no_keepdim(x, weight, bias, eps=1e-6):
    mean = x.mean(-1)
    var = x.var(-1, unbiased=False)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


# --- 04 TransformerBlock --------------------------------------------------------------------------


def _block(forward):
    class Learner(nn.Module):
        def __init__(self, dim, num_heads, mlp_dim):
            super().__init__()
            self.norm1 = nn.LayerNorm(dim, eps=1e-6)
            self.attn = MultiHeadSelfAttention(dim, num_heads)
            self.norm2 = nn.LayerNorm(dim, eps=1e-6)
            self.mlp = MLP(dim, mlp_dim)

        def forward(self, x):
            return forward(self, x)

    return Learner


def _post_norm(s, x):
    x = s.norm1(x + s.attn(x))
    return s.norm2(x + s.mlp(x))


def _no_attn_residual(s, x):
    x = s.attn(s.norm1(x))
    return x + s.mlp(s.norm2(x))


def _no_mlp_residual(s, x):
    x = x + s.attn(s.norm1(x))
    return s.mlp(s.norm2(x))


def _normed_residual(s, x):
    x = s.norm1(x)
    x = x + s.attn(x)
    x = s.norm2(x)
    return x + s.mlp(x)


def _parallel(s, x):
    return x + s.attn(s.norm1(x)) + s.mlp(s.norm2(x))


def _norms_swapped(s, x):
    x = x + s.attn(s.norm2(x))
    return x + s.mlp(s.norm1(x))


def _module_passed(s, x):
    x = x + s.attn(s.norm1(x))
    return x + s.mlp(s.norm2)


attempt("TransformerBlock", "post-norm", "post-norm")(_block(_post_norm))
attempt("TransformerBlock", "no attention residual", "attention branch's residual")(
    _block(_no_attn_residual)
)
attempt("TransformerBlock", "no MLP residual", "MLP branch's residual")(_block(_no_mlp_residual))
attempt("TransformerBlock", "the normalised tokens as residual", "un-normalised")(
    _block(_normed_residual)
)
attempt("TransformerBlock", "both branches on the input", "MLP branch should read")(
    _block(_parallel)
)
attempt("TransformerBlock", "norm1 and norm2 swapped", "norm1 belongs")(_block(_norms_swapped))
attempt("TransformerBlock", "a module passed where its output belongs", "LayerNorm")(
    _block(_module_passed)
)


# --- 05 ViT ---------------------------------------------------------------------------------------


def _vit(forward):
    class Learner(nn.Module):
        def __init__(self, config):
            super().__init__()
            c = config
            self.patch_embed = PatchEmbedding(c.image_size, c.patch_size, c.in_channels, c.dim)
            self.cls_token = nn.Parameter(torch.zeros(1, 1, c.dim))
            self.pos_embed = nn.Parameter(torch.zeros(1, c.num_tokens, c.dim))
            self.blocks = nn.ModuleList(
                TransformerBlock(c.dim, c.num_heads, c.mlp_dim, qkv_bias=c.qkv_bias)
                for _ in range(c.depth)
            )
            self.norm = nn.LayerNorm(c.dim, eps=1e-6)
            self.head = nn.Linear(c.dim, c.num_classes)

        def forward(self, images):
            return forward(self, images)

    return Learner


def _blocks(s, x):
    for block in s.blocks:
        x = block(x)
    return x


def _vit_no_pos(s, images):
    x = s.patch_embed(images)
    x = torch.cat([s.cls_token.expand(x.shape[0], -1, -1), x], 1)
    return s.head(s.norm(_blocks(s, x))[:, 0])


def _vit_cls_last(s, images):
    x = s.patch_embed(images)
    x = torch.cat([x, s.cls_token.expand(x.shape[0], -1, -1)], 1) + s.pos_embed
    return s.head(s.norm(_blocks(s, x))[:, 0])


def _vit_mean_pool(s, images):
    x = embed_tokens(s.patch_embed(images), s.cls_token, s.pos_embed)
    return s.head(s.norm(_blocks(s, x)).mean(1))


def _vit_no_norm(s, images):
    x = embed_tokens(s.patch_embed(images), s.cls_token, s.pos_embed)
    return s.head(_blocks(s, x)[:, 0])


def _vit_last_token(s, images):
    x = embed_tokens(s.patch_embed(images), s.cls_token, s.pos_embed)
    return s.head(s.norm(_blocks(s, x))[:, -1])


def _vit_every_token(s, images):
    x = embed_tokens(s.patch_embed(images), s.cls_token, s.pos_embed)
    return s.head(s.norm(_blocks(s, x)))


def _vit_unexpanded(s, images):
    x = s.patch_embed(images)
    x = torch.cat([s.cls_token, x], 1) + s.pos_embed
    return s.head(s.norm(_blocks(s, x))[:, 0])


attempt("ViT", "no positions", "position embeddings are not added")(_vit(_vit_no_pos))
attempt("ViT", "the cls token at the end", "cls token goes in front")(_vit(_vit_cls_last))
attempt("ViT", "mean pooling", "pools with the cls token")(_vit(_vit_mean_pool))
attempt("ViT", "no final norm", "final LayerNorm is missing")(_vit(_vit_no_norm))
attempt("ViT", "the last token classified", "not the last token")(_vit(_vit_last_token))
attempt("ViT", "every token classified", "logits for every token")(_vit(_vit_every_token))
attempt("ViT", "the cls token not expanded", "its own view")(_vit(_vit_unexpanded))


# --- 05 count_parameters --------------------------------------------------------------------------


def _count(config, cls=True, pos_rows=None, norms=True, biases=True, qkv_bias=None, sincos=False):
    D, C, P = config.dim, config.in_channels, config.patch_size
    with_qkv_bias = config.qkv_bias if qkv_bias is None else qkv_bias
    rows = config.num_tokens if pos_rows is None else pos_rows(config)
    counted_pos = config.pos_embed == "learned" or sincos
    b = 1 if biases else 0
    patch_embed = C * P * P * D + b * D
    tokens = (D if cls else 0) + (rows * D if counted_pos else 0)
    attn = D * 3 * D + (3 * D if with_qkv_bias and biases else 0) + D * D + b * D
    mlp = D * config.mlp_dim + b * config.mlp_dim + config.mlp_dim * D + b * D
    per_block = (2 * 2 * D if norms else 0) + attn + mlp
    head = (2 * D if norms else 0) + D * config.num_classes + b * config.num_classes
    return patch_embed + tokens + config.depth * per_block + head


attempt("count_parameters", "no cls token", "cls token")(lambda c: _count(c, cls=False))
attempt("count_parameters", "a position for each patch only (N, not T)", "position")(
    lambda c: _count(c, pos_rows=lambda c: c.num_patches)
)
attempt("count_parameters", "no LayerNorms", "LayerNorms")(lambda c: _count(c, norms=False))
attempt("count_parameters", "no biases", "biases")(lambda c: _count(c, biases=False))
attempt("count_parameters", "qkv biases always counted", "qkv_bias")(
    lambda c: _count(c, qkv_bias=True)
)
attempt("count_parameters", "sin-cos positions counted", "sin-cos")(
    lambda c: _count(c, sincos=True)
)


@attempt("count_parameters", "a field the config does not have", "mlp_ratio")
def count_mlp_ratio(config):
    hidden = config.dim * config.mlp_ratio
    return _count(config) - config.mlp_dim + hidden


# --- 06 train_step --------------------------------------------------------------------------------


@attempt("train_step", "the gradients never reset", "never reset")
def step_no_zero(model, optimizer, images, labels, label_smoothing, grad_clip):
    loss = F.cross_entropy(model(images), labels, label_smoothing=label_smoothing)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    return loss


@attempt("train_step", "the gradients reset before the update", "never change")
def step_zero_late(model, optimizer, images, labels, label_smoothing, grad_clip):
    loss = F.cross_entropy(model(images), labels, label_smoothing=label_smoothing)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.zero_grad()
    optimizer.step()
    return loss


@attempt("train_step", "no clipping", "not clipped")
def step_no_clip(model, optimizer, images, labels, label_smoothing, grad_clip):
    loss = F.cross_entropy(model(images), labels, label_smoothing=label_smoothing)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


@attempt("train_step", "no label smoothing", "label smoothing is missing")
def step_no_smoothing(model, optimizer, images, labels, label_smoothing, grad_clip):
    loss = F.cross_entropy(model(images), labels)
    optimizer.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    return loss


@attempt("train_step", "model.eval() inside the step", "evaluation mode")
def step_eval(model, optimizer, images, labels, label_smoothing, grad_clip):
    model.eval()
    loss = F.cross_entropy(model(images), labels, label_smoothing=label_smoothing)
    optimizer.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    return loss


@attempt("train_step", "the clip norm written in", "grad_clip")
def step_fixed_clip(model, optimizer, images, labels, label_smoothing, grad_clip):
    loss = F.cross_entropy(model(images), labels, label_smoothing=label_smoothing)
    optimizer.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return loss


@attempt("train_step", "the smoothing written in", "label_smoothing")
def step_fixed_smoothing(model, optimizer, images, labels, label_smoothing, grad_clip):
    loss = F.cross_entropy(model(images), labels, label_smoothing=0.1)
    optimizer.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    return loss


@attempt("train_step", "model.parameters without the call", "parentheses")
def step_parameters_uncalled(model, optimizer, images, labels, label_smoothing, grad_clip):
    loss = F.cross_entropy(model(images), labels, label_smoothing=label_smoothing)
    optimizer.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters, grad_clip)
    optimizer.step()
    return loss


# --- 07 attention_rollout -------------------------------------------------------------------------


def _rollout(combine=lambda m: m.mean(1), residual=True, renormalise=True, new_left=True):
    def attention_rollout(maps):
        L, B, h, T, _ = maps.shape
        identity = torch.eye(T)
        rollout = identity.expand(B, T, T)
        for layer in maps:
            a = combine(layer) + (identity if residual else 0)
            if renormalise:
                a = a / a.sum(dim=-1, keepdim=True)
            rollout = a @ rollout if new_left else rollout @ a
        return rollout

    return attention_rollout


attempt("attention_rollout", "no residual", "residual path is missing")(_rollout(residual=False))
attempt("attention_rollout", "rows not renormalised", "divide each row by its sum")(
    _rollout(renormalise=False)
)
attempt("attention_rollout", "layers multiplied the other way", "wrong order")(
    _rollout(new_left=False)
)
attempt("attention_rollout", "the heads' maximum", "not their maximum")(
    _rollout(combine=lambda m: m.max(1).values)
)


@attempt("attention_rollout", "only the last layer", "only the last layer")
def rollout_last(maps):
    a = maps[-1].mean(1) + torch.eye(maps.shape[-1])
    return a / a.sum(-1, keepdim=True)


@attempt("attention_rollout", "the identity added in place to the caller's maps", "in place")
def rollout_in_place(maps):
    L, B, h, T, _ = maps.shape
    rollout = torch.eye(T).expand(B, T, T)
    for layer in maps:
        layer += torch.eye(T) / h  # the identity, spread over the heads
        a = layer.mean(1)
        a = a / a.sum(-1, keepdim=True)
        rollout = a @ rollout
    return rollout


# --- 08 equivariance_error ------------------------------------------------------------------------


def _equivariance(inner=lambda b: (..., slice(b, -b)), dims=-1, denominator="then", shift_f=True):
    def equivariance_error(features, image, shift, border, move=roll):
        if dims == -1:
            then_shift = move(features(image), shift if shift_f else 0)
            shift_first = features(move(image, shift))
        else:  # the height: torch.roll along another axis
            then_shift = torch.roll(features(image), shifts=shift, dims=dims)
            shift_first = features(torch.roll(image, shifts=shift, dims=dims))
        part = inner(border)
        below = then_shift if denominator == "then" else shift_first
        return ((then_shift - shift_first)[part].norm() / below[part].norm()).item()

    return equivariance_error


attempt("equivariance_error", "border=0 gives an empty slice", "border")(_equivariance())
attempt("equivariance_error", "the border ignored", "border")(_equivariance(inner=lambda b: (...,)))
attempt("equivariance_error", "shifted along the height", "width")(_equivariance(dims=-2))
attempt("equivariance_error", "the features not shifted", "shift the features too")(
    _equivariance(shift_f=False)
)
attempt("equivariance_error", "divided by the other path", "computed first, then")(
    _equivariance(denominator="first")
)


@attempt("equivariance_error", "not relative", "relative")
def equivariance_absolute(features, image, shift, border, move=roll):
    then_shift = move(features(image), shift)
    shift_first = features(move(image, shift))
    return (then_shift - shift_first)[..., border : image.shape[-1] - border].norm().item()


@attempt("equivariance_error", "the divisor over the whole width", "denominator too")
def equivariance_whole_divisor(features, image, shift, border, move=roll):
    then_shift = move(features(image), shift)
    shift_first = features(move(image, shift))
    W = image.shape[-1]
    return ((then_shift - shift_first)[..., border : W - border].norm() / then_shift.norm()).item()


@attempt("equivariance_error", "move ignored: torch.roll always", "not always torch.roll")
def equivariance_always_rolls(features, image, shift, border, move=roll):
    then_shift = torch.roll(features(image), shift, dims=-1)
    shift_first = features(torch.roll(image, shift, dims=-1))
    W = image.shape[-1]
    inner = (..., slice(border, W - border))
    return ((then_shift - shift_first)[inner].norm() / then_shift[inner].norm()).item()


# --- 09 random_masking ----------------------------------------------------------------------------


def _masking(count=round, per_image=True, sort=True, generator_used=True, ratio=None, flip=False):
    def random_masking(batch_size, num_patches, mask_ratio, generator=None):
        r = mask_ratio if ratio is None else ratio
        hidden = int(count(num_patches * r))
        rows = batch_size if per_image else 1
        gen = generator if generator_used else None
        noise = torch.rand(rows, num_patches, generator=gen).expand(batch_size, -1)
        order = noise.argsort(dim=1)
        visible = order[:, : num_patches - hidden]
        if sort:
            visible = visible.sort(dim=1).values
        mask = torch.ones(batch_size, num_patches, dtype=torch.bool)
        mask.scatter_(1, visible, False)
        return visible, (~mask if flip else mask)

    return random_masking


attempt("random_masking", "int() where the count needs round()", "round")(_masking(count=int))
attempt("random_masking", "one choice for the whole batch", "its own random choice")(
    _masking(per_image=False)
)
attempt("random_masking", "visible not sorted", "increasing order")(_masking(sort=False))
attempt("random_masking", "the generator not used", "generator")(_masking(generator_used=False))
attempt("random_masking", "the example's ratio written in", "mask_ratio")(_masking(ratio=0.75))
attempt("random_masking", "mask True on the visible patches", "HIDDEN")(_masking(flip=True))


@attempt("random_masking", "each patch hidden with probability mask_ratio", "exactly that many")
def masking_bernoulli(batch_size, num_patches, mask_ratio, generator=None):
    mask = torch.rand(batch_size, num_patches, generator=generator) < mask_ratio
    hidden = round(num_patches * mask_ratio)
    visible = torch.rand(batch_size, num_patches, generator=generator).argsort(1)
    return visible[:, : num_patches - hidden].sort(1).values, mask


# --- 09 masked_patch_loss -------------------------------------------------------------------------


attempt("masked_patch_loss", "every patch averaged", "count only the hidden ones")(
    lambda p, t, m: ((p - t) ** 2).mean()
)
attempt("masked_patch_loss", "the visible patches", "HIDDEN")(
    lambda p, t, m: ((p - t) ** 2).mean(-1)[~m].mean()
)
attempt("masked_patch_loss", "each patch's errors summed", "take their mean over the K numbers")(
    lambda p, t, m: ((p - t) ** 2).sum(-1)[m].mean()
)
attempt("masked_patch_loss", "divided by every patch", "number of hidden patches")(
    lambda p, t, m: (((p - t) ** 2).mean(-1) * m).sum() / m.numel()
)
attempt("masked_patch_loss", "a mean of the images' means", "each image's own mean")(
    lambda p, t, m: ((((p - t) ** 2).mean(-1) * m).sum(1) / m.sum(1)).mean()
)
attempt("masked_patch_loss", "an absolute error", "squared")(
    lambda p, t, m: (p - t).abs().mean(-1)[m].mean()
)
attempt("masked_patch_loss", "a number returned (.item())", "a Python number")(
    lambda p, t, m: ((p - t) ** 2).mean(-1)[m].mean().item()
)


# --- 09 distillation_loss -------------------------------------------------------------------------


def _distill(hard=None, soft=None):
    """A learner's distillation_loss from its two branches (None: still open)."""

    def distillation_loss(
        cls_logits, dist_logits, teacher_logits, labels, kind="hard", alpha=0.5, tau=1.0
    ):
        base = F.cross_entropy(cls_logits, labels)
        branch = hard if kind == "hard" else soft
        if branch is None:
            raise NotImplementedError()
        return branch(base, cls_logits, dist_logits, teacher_logits, labels, alpha, tau)

    return distillation_loss


def _soft_kl(dist_logits, teacher_logits, tau):
    return F.kl_div(
        F.log_softmax(dist_logits / tau, -1),
        F.log_softmax(teacher_logits / tau, -1),
        reduction="batchmean",
        log_target=True,
    )


def _good_hard(base, c, d, t, y, alpha, tau):
    return (1 - alpha) * base + alpha * F.cross_entropy(d, t.argmax(-1))


def _good_soft(base, c, d, t, y, alpha, tau):
    return (1 - alpha) * base + alpha * tau**2 * _soft_kl(d, t, tau)


attempt("distillation_loss", "hard on the teacher's probabilities", "teacher's guesses")(
    _distill(
        lambda b, c, d, t, y, a, tau: (1 - a) * b + a * F.cross_entropy(d, t.softmax(-1)),
        _good_soft,
    )
)
attempt("distillation_loss", "alpha the wrong way round", "alpha weighs the teacher's part")(
    _distill(lambda b, c, d, t, y, a, tau: a * b + (1 - a) * F.cross_entropy(d, t.argmax(-1)))
)
attempt("distillation_loss", "no τ²", "τ²")(
    _distill(_good_hard, lambda b, c, d, t, y, a, tau: (1 - a) * b + a * _soft_kl(d, t, tau))
)
attempt("distillation_loss", "the KL divergence reversed", "wrong way round")(
    _distill(
        _good_hard, lambda b, c, d, t, y, a, tau: (1 - a) * b + a * tau**2 * _soft_kl(t, d, tau)
    )
)
attempt("distillation_loss", "reduction='mean'", "batch × classes")(
    _distill(
        _good_hard,
        lambda b, c, d, t, y, a, tau: (
            (1 - a) * b
            + a
            * tau**2
            * F.kl_div(
                F.log_softmax(d / tau, -1),
                F.log_softmax(t / tau, -1),
                reduction="mean",
                log_target=True,
            )
        ),
    )
)
attempt("distillation_loss", "the teacher not softened", "soften the teacher's logits")(
    _distill(
        _good_hard,
        lambda b, c, d, t, y, a, tau: (
            (1 - a) * b
            + a
            * tau**2
            * F.kl_div(
                F.log_softmax(d / tau, -1),
                F.log_softmax(t, -1),
                reduction="batchmean",
                log_target=True,
            )
        ),
    )
)
attempt("distillation_loss", "probabilities with log_target=True", "log_target")(
    _distill(
        _good_hard,
        lambda b, c, d, t, y, a, tau: (
            (1 - a) * b
            + a
            * tau**2
            * F.kl_div(
                F.log_softmax(d / tau, -1),
                F.softmax(t / tau, -1),
                reduction="batchmean",
                log_target=True,
            )
        ),
    )
)
attempt("distillation_loss", "the example's τ written in", "tau")(
    _distill(_good_hard, lambda b, c, d, t, y, a, tau: (1 - a) * b + a * 9.0 * _soft_kl(d, t, 3.0))
)
attempt("distillation_loss", "the hard branch wrong, the soft one open", "not written yet")(
    _distill(lambda b, c, d, t, y, a, tau: a * b + (1 - a) * F.cross_entropy(d, t.argmax(-1)))
)
attempt("distillation_loss", "argmax without dim", "dim")(
    _distill(lambda b, c, d, t, y, a, tau: (1 - a) * b + a * F.cross_entropy(d, t.argmax()))
)


@attempt("distillation_loss", "the caller's teacher logits softened in place", "in place")
def distill_in_place(
    cls_logits, dist_logits, teacher_logits, labels, kind="hard", alpha=0.5, tau=1.0
):
    base = F.cross_entropy(cls_logits, labels)
    if kind == "hard":
        return (1 - alpha) * base + alpha * F.cross_entropy(dist_logits, teacher_logits.argmax(-1))
    teacher_logits /= tau
    kl = F.kl_div(
        F.log_softmax(dist_logits / tau, -1),
        F.log_softmax(teacher_logits, -1),
        reduction="batchmean",
        log_target=True,
    )
    return (1 - alpha) * base + alpha * tau**2 * kl


# --- 09 scramble ----------------------------------------------------------------------------------


def _scramble(patch_by=lambda o: o, number_by=lambda o: o, P=None):
    def scramble(images, patch_size, patch_order, pixel_order):
        size = patch_size if P is None else P
        patches = reference_patchify(images, size)
        moved = patches[:, patch_by(patch_order)][:, :, number_by(pixel_order)]
        return reference_unpatchify(moved, size, images.shape[-2:])

    return scramble


attempt("scramble", "the patches moved backwards", "the other way")(
    _scramble(patch_by=lambda o: o.argsort())
)
attempt("scramble", "the numbers moved backwards", "the other way")(
    _scramble(number_by=lambda o: o.argsort())
)
attempt("scramble", "pixel_order not applied", "apply pixel_order")(
    _scramble(number_by=lambda o: torch.arange(len(o)))
)
attempt("scramble", "patch_order not applied", "apply patch_order")(
    _scramble(patch_by=lambda o: torch.arange(len(o)))
)
attempt("scramble", "the example's patch size written in", "patch_size")(_scramble(P=4))


@attempt("scramble", "a plain reshape", "plain reshape")
def scramble_reshape(images, patch_size, patch_order, pixel_order):
    B, C, H, W = images.shape
    N, K = len(patch_order), len(pixel_order)
    return images.reshape(B, N, K)[:, patch_order][:, :, pixel_order].reshape(B, C, H, W)


@attempt("scramble", "the scrambled patches returned", "give them back as images")
def scramble_patches(images, patch_size, patch_order, pixel_order):
    return reference_patchify(images, patch_size)[:, patch_order][:, :, pixel_order]


# --- found by a second, independent set of attempts ------------------------------------------


@attempt("attention", "axes counted from the front, for 4-D inputs only", "counted from the front")
def attention_four_d(q, k, v):
    weights = torch.softmax(q @ k.transpose(2, 3) / math.sqrt(q.size(3)), dim=3)
    return weights @ v, weights


@attempt("attention", "a usual head width written in", "written into your code")
def attention_width_32(q, k, v):
    weights = (q @ k.transpose(-2, -1) / math.sqrt(32)).softmax(-1)
    return weights @ v, weights


def _mhsa_four_heads(self, x):
    B, T, D = x.shape
    h, d = 4, D // 4  # the course model's four heads
    q, k, v = self.qkv(x).reshape(B, T, 3, h, d).permute(2, 0, 3, 1, 4)
    return self.proj(_attend(q, k, v, math.sqrt(d)).transpose(1, 2).reshape(B, T, D))


attempt("MultiHeadSelfAttention", "4 heads written in", "number of heads is written")(
    _mhsa(_mhsa_four_heads)
)


def _mhsa_tuple(self, x):
    B, T, D = x.shape
    h, d = self.num_heads, self.head_dim
    q, k, v = self.qkv(x).reshape(B, T, 3, h, d).permute(2, 0, 3, 1, 4)
    out = F.scaled_dot_product_attention(q, k, v), None  # a pair, as `attention` returns
    return self.proj(out.transpose(1, 2).reshape(B, T, D))


attempt(
    "MultiHeadSelfAttention", "attention's pair used as one tensor", "a tuple has no attribute"
)(_mhsa(_mhsa_tuple))


@attempt("patchify", "one channel written in", "the channels C")
def patchify_one_channel(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, 1, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(B, -1, P * P)


def _pe_no_bias(self, images):
    x = F.conv2d(images, self.proj.weight, stride=self.proj.stride)
    return x.flatten(2).transpose(1, 2)


attempt("PatchEmbedding", "the convolution without its bias", "bias is missing")(
    _patch_embedding(_pe_no_bias)
)


@attempt("layer_norm", "no eps at all", "eps argument is ignored")
def ln_no_eps(x, weight, bias, eps=1e-6):
    mean = x.mean(-1, keepdim=True)
    return (x - mean) * torch.rsqrt(x.var(-1, keepdim=True, unbiased=False)) * weight + bias


attempt("count_parameters", "the patch embedding's biases left out", "patch embedding's D biases")(
    lambda c: _count(c) - c.dim
)


@attempt("train_step", "the forward under torch.no_grad()", "no gradient to follow")
def step_no_grad(model, optimizer, images, labels, label_smoothing, grad_clip):
    with torch.no_grad():
        logits = model(images)
    loss = F.cross_entropy(logits, labels, label_smoothing=label_smoothing)
    optimizer.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    return loss


@attempt("random_masking", "math.ceil where the count needs round()", "math.ceil")
def masking_ceil(batch_size, num_patches, mask_ratio, generator=None):
    hidden = math.ceil(num_patches * mask_ratio)
    return _masking()(batch_size, num_patches, hidden / num_patches, generator)


@attempt("random_masking", "the hidden places cleared for every row", "hides no patch")
def masking_cleared(batch_size, num_patches, mask_ratio, generator=None):
    visible, _ = _masking()(batch_size, num_patches, mask_ratio, generator)
    mask = torch.ones(batch_size, num_patches, dtype=torch.bool)
    mask[:, visible] = False
    return visible, mask


attempt("masked_patch_loss", "computed under torch.no_grad()", "carries no gradient")(
    lambda p, t, m: _no_grad(lambda: ((p - t) ** 2).mean(-1)[m].mean())
)


def _no_grad(compute):
    with torch.no_grad():
        return compute()


attempt("distillation_loss", "computed under torch.no_grad()", "carries no gradient")(
    lambda *args, **kwargs: _no_grad(lambda: _distill(_good_hard, _good_soft)(*args, **kwargs))
)
attempt("distillation_loss", "the hard loss softened by tau", "takes no temperature")(
    _distill(
        lambda b, c, d, t, y, a, tau: (1 - a) * b + a * F.cross_entropy(d / tau, t.argmax(-1)),
        _good_soft,
    )
)


@attempt("scramble", "the patches put back on a square grid", "not square")
def scramble_square(images, patch_size, patch_order, pixel_order):
    moved = reference_patchify(images, patch_size)[:, patch_order][:, :, pixel_order]
    return reference_unpatchify(moved, patch_size, images.shape[-1])
