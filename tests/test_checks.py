"""vitcourse.checks: each check accepts the reference, says so when the exercise is still open,
and rejects the realistic mistakes with the hint that names them. The wrong answers below are
written the way a learner would write them, not copied from the checks' own simulations."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from vitcourse import checks
from vitcourse.attention import MultiHeadSelfAttention, scaled_dot_product_attention
from vitcourse.block import MLP, TransformerBlock
from vitcourse.embedding import PatchEmbedding
from vitcourse.patching import patchify, unpatchify
from vitcourse.vit import VisionTransformer, count_parameters


def open_exercise(*args, **kwargs):
    raise NotImplementedError()


def test_open_exercise_hands_back_the_reference(capsys):
    assert checks.check_patchify(open_exercise) is patchify
    assert "not written yet" in capsys.readouterr().out
    assert checks.check_attention(open_exercise) is scaled_dot_product_attention


def test_correct_answer_is_returned_and_praised(capsys):
    def my_patchify(images, patch_size):
        B, C, H, W = images.shape
        P = patch_size
        x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1)
        return x.reshape(B, -1, P * P * C)

    assert checks.check_patchify(my_patchify) is my_patchify
    assert "correct" in capsys.readouterr().out


# --- patches ----------------------------------------------------------------------------------


def _patchify_with(order):
    def fn(images, P):
        B, C, H, W = images.shape
        x = images.reshape(B, C, H // P, P, W // P, P).permute(*order)
        return x.reshape(B, (H // P) * (W // P), P * P * C)

    return fn


@pytest.mark.parametrize(
    "fn, hint",
    [
        (_patchify_with((0, 4, 2, 3, 5, 1)), "column by column. Walk the grid"),
        (_patchify_with((0, 2, 4, 1, 3, 5)), "channels should come last"),
        (
            lambda images, P: images.reshape(images.shape[0], -1, P * P * images.shape[1]),
            "a plain reshape does not cut out squares",
        ),
        (lambda images, P: patchify(images, P).transpose(1, 2), "last two axes are swapped"),
        (lambda images, P: patchify(images, P) * 2, "shape is right but the values are not"),
    ],
)
def test_patchify_mistakes(fn, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_patchify(fn)


def test_unpatchify():
    assert checks.check_unpatchify(unpatchify) is unpatchify
    with pytest.raises(AssertionError, match="plain reshape does not put the squares back"):
        checks.check_unpatchify(lambda p, P, size: p.reshape(p.shape[0], -1, *size))
    with pytest.raises(AssertionError, match="should give x back"):
        checks.check_unpatchify(lambda p, P, size: unpatchify(p, P, size).flip(-1))


# --- embeddings -------------------------------------------------------------------------------


def _patch_embedding(forward):
    class Learner(nn.Module):
        def __init__(self, image_size, patch_size, in_channels, dim):
            super().__init__()
            self.proj = nn.Conv2d(in_channels, dim, kernel_size=patch_size, stride=patch_size)

        def forward(self, images):
            return forward(self.proj(images))

    return Learner


def test_patch_embedding():
    good = _patch_embedding(lambda x: x.flatten(2).transpose(1, 2))
    assert checks.check_patch_embedding(good) is good
    assert checks.check_patch_embedding(PatchEmbedding) is PatchEmbedding


@pytest.mark.parametrize(
    "forward, hint",
    [
        (lambda x: x.flatten(2), r"that is \(B, D, N\)"),
        (lambda x: x, "flatten the grid into N"),
        (lambda x: x.reshape(x.shape[0], -1, x.shape[1]), "swap the axes with .transpose"),
        (lambda x: x.flatten(2).transpose(1, 2).flip(1), "shape is right but the values"),
        (lambda x: x.transpose(2, 3).flatten(2).transpose(1, 2), "column by column"),
    ],
)
def test_patch_embedding_mistakes(forward, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_patch_embedding(_patch_embedding(forward))


def test_patch_embedding_with_other_parameter_names_is_refused():
    class Renamed(nn.Module):
        def __init__(self, image_size, patch_size, in_channels, dim):
            super().__init__()
            self.conv = nn.Conv2d(in_channels, dim, patch_size, patch_size)

        def forward(self, images):
            return self.conv(images).flatten(2).transpose(1, 2)

    with pytest.raises(AssertionError, match="keep __init__ exactly as given"):
        checks.check_patch_embedding(Renamed)


def test_embed_tokens():
    def good(x, cls_token, pos):
        return torch.cat([cls_token.expand(x.shape[0], -1, -1), x], dim=1) + pos

    assert checks.check_embed_tokens(good) is good
    with pytest.raises(AssertionError, match="cls token goes in front"):
        checks.check_embed_tokens(
            lambda x, c, p: torch.cat([x, c.expand(x.shape[0], -1, -1)], 1) + p
        )
    with pytest.raises(AssertionError, match="position embeddings are missing"):
        checks.check_embed_tokens(lambda x, c, p: torch.cat([c.expand(x.shape[0], -1, -1), x], 1))
    with pytest.raises(AssertionError, match="extra token, concatenated"):
        checks.check_embed_tokens(lambda x, c, p: x + c)


# --- attention --------------------------------------------------------------------------------


def test_attention_accepts_both_good_forms():
    def by_hand(q, k, v):
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
        return w @ v, w

    assert checks.check_attention(by_hand) is by_hand
    assert checks.check_attention(scaled_dot_product_attention) is scaled_dot_product_attention


def _attention(scale, dim, transpose_scores=False):
    def fn(q, k, v):
        scores = (k @ q.transpose(-2, -1)) if transpose_scores else (q @ k.transpose(-2, -1))
        w = torch.softmax(scores / scale(q.shape[-1]), dim=dim)
        return w @ v, w

    return fn


@pytest.mark.parametrize(
    "fn, hint",
    [
        (_attention(lambda d: 1.0, -1), "not scaled: divide q @ k\\^T by sqrt\\(d\\)"),
        (_attention(lambda d: d, -1), "divide by sqrt\\(d\\), not by d"),
        (_attention(math.sqrt, 1 + 1), "softmax over the wrong axis"),  # dim=2 on (B, h, T, T)
        (_attention(math.sqrt, -1, transpose_scores=True), "scores are transposed"),
        (lambda q, k, v: scaled_dot_product_attention(q, k, v)[0], "should return a pair"),
        (
            lambda q, k, v: (
                scaled_dot_product_attention(q, k, v)[1].transpose(-2, -1) @ v,
                scaled_dot_product_attention(q, k, v)[1],
            ),
            "transposed weights: out = ",
        ),
    ],
)
def test_attention_mistakes(fn, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_attention(fn)


class _MHSA(nn.Module):
    """A learner's multi-head attention with the skeleton's __init__ and a configurable forward."""

    def __init__(self, dim, num_heads, split="right", merge="right", proj=True, scale="d"):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, dim // num_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.split, self.merge, self.use_proj, self.scale = split, merge, proj, scale

    def forward(self, x):
        B, T, D = x.shape
        h, d = self.num_heads, self.head_dim
        q, k, v = self.qkv(x).chunk(3, dim=-1)  # each (B, T, D)
        if self.split == "right":
            q, k, v = (t.reshape(B, T, h, d).transpose(1, 2) for t in (q, k, v))
        else:  # the classic slip: reshape straight to (B, h, T, d)
            q, k, v = (t.reshape(B, h, T, d) for t in (q, k, v))
        scale = {"d": math.sqrt(d), "D": math.sqrt(D), "none": 1.0}[self.scale]
        out = torch.softmax(q @ k.transpose(-2, -1) / scale, dim=-1) @ v
        out = (
            out.transpose(1, 2).reshape(B, T, D) if self.merge == "right" else out.reshape(B, T, D)
        )
        return self.proj(out) if self.use_proj else out


def _mhsa(**kwargs):
    return lambda dim, num_heads: _MHSA(dim, num_heads, **kwargs)


def test_multi_head_attention_accepts_good_answers():
    good = _mhsa()
    assert checks.check_multi_head_attention(good) is good
    assert checks.check_multi_head_attention(MultiHeadSelfAttention) is MultiHeadSelfAttention


@pytest.mark.parametrize(
    "kwargs, hint",
    [
        ({"split": "naive"}, "split without moving the head axis"),
        ({"split": "naive", "merge": "naive"}, "split without moving the head axis"),
        ({"merge": "naive"}, "merged without moving the head axis back"),
        ({"proj": False}, "output projection is missing"),
        ({"scale": "D"}, "not by sqrt\\(D\\)"),
        ({"scale": "none"}, "not scaled"),
    ],
)
def test_multi_head_attention_mistakes(kwargs, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_multi_head_attention(_mhsa(**kwargs))


# --- the block --------------------------------------------------------------------------------


def test_layer_norm():
    def good(x, weight, bias, eps=1e-6):
        mu = x.mean(-1, keepdim=True)
        return (x - mu) / torch.sqrt(((x - mu) ** 2).mean(-1, keepdim=True) + eps) * weight + bias

    assert checks.check_layer_norm(good) is good
    with pytest.raises(AssertionError, match="population variance"):
        checks.check_layer_norm(
            lambda x, w, b, eps=1e-6: (
                (x - x.mean(-1, keepdim=True)) / (x.var(-1, keepdim=True) + eps).sqrt() * w + b
            )
        )
    with pytest.raises(AssertionError, match="over its D features"):
        checks.check_layer_norm(
            lambda x, w, b, eps=1e-6: (
                (x - x.mean(1, keepdim=True))
                / (x.var(1, keepdim=True, unbiased=False) + eps).sqrt()
                * w
                + b
            )
        )
    with pytest.raises(AssertionError, match="scale by weight and shift by bias"):
        checks.check_layer_norm(lambda x, w, b, eps=1e-6: F.layer_norm(x, x.shape[-1:]))


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


def _pre_norm(s, x):
    x = x + s.attn(s.norm1(x))
    return x + s.mlp(s.norm2(x))


def _post_norm(s, x):
    x = s.norm1(x + s.attn(x))
    return s.norm2(x + s.mlp(x))


def _no_attn_residual(s, x):
    x = s.attn(s.norm1(x))
    return x + s.mlp(s.norm2(x))


def _normed_residual(s, x):
    x = s.norm1(x)
    x = x + s.attn(x)
    x = s.norm2(x)
    return x + s.mlp(x)


def _parallel(s, x):
    return x + s.attn(s.norm1(x)) + s.mlp(s.norm2(x))


def test_transformer_block():
    good = _block(_pre_norm)
    assert checks.check_transformer_block(good) is good
    assert checks.check_transformer_block(TransformerBlock) is TransformerBlock


@pytest.mark.parametrize(
    "forward, hint",
    [
        (_post_norm, "post-norm"),
        (_no_attn_residual, "attention branch's residual is missing"),
        (lambda s, x: s.mlp(s.norm2(x + s.attn(s.norm1(x)))), "MLP branch's residual is missing"),
        (_normed_residual, "un-normalised x"),
        (_parallel, "MLP should read the output of the attention step"),
    ],
)
def test_transformer_block_mistakes(forward, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_transformer_block(_block(forward))


# --- the whole model --------------------------------------------------------------------------


def _vit(forward):
    class Learner(VisionTransformer):  # the skeleton's __init__ is the reference's
        def forward(self, images):
            return forward(self, images)

    return Learner


def _good_forward(m, images, pool=lambda t: t[:, 0], front=True, pos=True, norm=True):
    x = m.patch_embed(images)
    cls = m.cls_token.expand(x.shape[0], -1, -1)
    x = torch.cat([cls, x] if front else [x, cls], dim=1)
    if pos:
        x = x + m.pos_embed
    for blk in m.blocks:
        x = blk(x)
    if norm:
        x = m.norm(x)
    return m.head(pool(x))


def test_vision_transformer():
    good = _vit(_good_forward)
    assert checks.check_vision_transformer(good) is good


@pytest.mark.parametrize(
    "kwargs, hint",
    [
        ({"pos": False}, "position embeddings are not added"),
        ({"front": False}, "cls token goes in front"),
        ({"pool": lambda t: t[:, -1]}, "not the last token"),
        ({"pool": lambda t: t.mean(1)}, "not a mean"),
        ({"norm": False}, "final LayerNorm is missing"),
        ({"pool": lambda t: t}, "pool to one vector per image"),
    ],
)
def test_vision_transformer_mistakes(kwargs, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_vision_transformer(_vit(lambda m, x: _good_forward(m, x, **kwargs)))


def test_parameter_count_check():
    assert checks.check_parameter_count(count_parameters) is count_parameters
    with pytest.raises(AssertionError, match="did you leave out the cls token"):
        checks.check_parameter_count(lambda c: count_parameters(c) - c.dim)
    with pytest.raises(AssertionError, match="did you leave out the LayerNorms"):
        checks.check_parameter_count(lambda c: count_parameters(c) - (2 * c.depth + 1) * 2 * c.dim)
    with pytest.raises(AssertionError, match="count each piece"):
        checks.check_parameter_count(lambda c: 12345)


# --- notebook 06: the training step ------------------------------------------------------------


def _step(order: str, smoothing: bool = True):
    """A learner's train_step, its lines in the order given ("zero backward clip step", ...)."""

    def train_step(model, optimizer, images, labels, label_smoothing, grad_clip):
        loss = F.cross_entropy(
            model(images), labels, label_smoothing=label_smoothing if smoothing else 0.0
        )
        for part in order.split():
            if part == "zero":
                optimizer.zero_grad()
            elif part == "backward":
                loss.backward()
            elif part == "clip":
                nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
            elif part == "step":
                optimizer.step()
        return loss

    return train_step


def test_train_step_accepts_the_reference_and_a_learners_version(capsys):
    from vitcourse.training import train_step

    assert checks.EXERCISES["train_step"].check(train_step) is train_step  # passes its own check
    good = _step("zero backward clip step")
    assert checks.check_train_step(good) is good
    assert checks.check_train_step(open_exercise) is train_step
    assert "not written yet" in capsys.readouterr().out


@pytest.mark.parametrize(
    "fn, hint",
    [
        (_step("backward clip step"), "gradients are never reset"),
        (_step("zero backward clip"), "the weights never change"),
        (_step("backward clip zero step"), "zero the gradients \\*before\\* backward"),
        (_step("zero backward step"), "gradient norm is not clipped"),
        (_step("zero backward clip step", smoothing=False), "label smoothing is missing"),
    ],
)
def test_train_step_mistakes(fn, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_train_step(fn)


# --- notebook 07: attention rollout ------------------------------------------------------------


def _rollout(combine="mean", residual=True, renormalise=True, new_on_left=True, layers=None):
    def attention_rollout(maps):
        L, B, h, T, _ = maps.shape
        eye = torch.eye(T)
        result = eye.expand(B, T, T)
        for layer in maps if layers is None else maps[layers]:
            a = layer.mean(dim=1) if combine == "mean" else layer.amax(dim=1)
            if residual:
                a = a + eye
            if renormalise:
                a = a / a.sum(dim=-1, keepdim=True)
            result = a @ result if new_on_left else result @ a
        return result

    return attention_rollout


def test_attention_rollout_check_accepts_good_answers():
    from vitcourse.analysis import attention_rollout

    assert checks.check_attention_rollout(attention_rollout) is attention_rollout
    good = _rollout()
    assert checks.check_attention_rollout(good) is good


@pytest.mark.parametrize(
    "fn, hint",
    [
        (_rollout(residual=False), "the residual path is missing"),
        (_rollout(renormalise=False), "rows sum to 2"),
        (_rollout(new_on_left=False), "multiplied in the wrong order"),
        (_rollout(combine="max"), "by their mean"),
        (_rollout(layers=slice(-1, None)), "only the last layer"),
        (lambda maps: maps.mean(2), "one map per layer"),
    ],
)
def test_attention_rollout_mistakes(fn, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_attention_rollout(fn)


# --- notebook 08: translation equivariance -----------------------------------------------------


def _equivariance(shift_features=True, dims=-1, border=True, relative=True):
    def equivariance_error(features, image, shift, border_columns):
        a = features(image)
        if shift_features:
            a = torch.roll(a, shift, dims=dims)
        b = features(torch.roll(image, shift, dims=dims))
        if border:
            a, b = a[..., border_columns:-border_columns], b[..., border_columns:-border_columns]
        error = (a - b).norm()
        return (error / a.norm() if relative else error).item()

    return equivariance_error


def test_equivariance_check_accepts_good_answers():
    from vitcourse.analysis import equivariance_error

    assert checks.check_equivariance_error(equivariance_error) is equivariance_error
    good = _equivariance()
    assert checks.check_equivariance_error(good) is good


@pytest.mark.parametrize(
    "fn, hint",
    [
        (_equivariance(shift_features=False), "shift the features too"),
        (_equivariance(dims=-2), "shift along the width"),
        (_equivariance(border=False), "leave out `border` columns"),
        (_equivariance(relative=False), "make it relative"),
        (lambda f, x, s, b: "small", "should return one number"),
    ],
)
def test_equivariance_mistakes(fn, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_equivariance_error(fn)


# --- notebook 09 ------------------------------------------------------------------------------


def _masking(mode="good"):
    """random_masking as a learner might write it; `mode` names the mistake."""

    def random_masking(batch_size, num_patches, mask_ratio, generator=None):
        B, N = batch_size, num_patches
        keep = N - round(N * mask_ratio)
        if mode == "keeps the ratio":
            keep = round(N * mask_ratio)
        noise = torch.rand(B, N, generator=None if mode == "no generator" else generator)
        if mode == "one for all":
            noise = torch.rand(1, N, generator=generator).expand(B, N)
        visible = noise.argsort(dim=1)[:, :keep]
        if mode != "unsorted":
            visible = visible.sort(dim=1).values
        mask = torch.ones(B, N, dtype=torch.bool)
        mask.scatter_(1, visible, False)
        if mode == "inverted":
            mask = ~mask
        if mode == "coin flips":
            mask = torch.rand(B, N, generator=generator) < mask_ratio
        return visible, mask

    return random_masking


def test_random_masking_check_accepts_the_reference_and_another_good_answer():
    from vitcourse.pretraining import random_masking

    assert checks.check_random_masking(random_masking) is random_masking
    good = _masking()
    assert checks.check_random_masking(good) is good


@pytest.mark.parametrize(
    "mode, hint",
    [
        ("keeps the ratio", "mask_ratio is the share of patches hidden"),
        ("inverted", "mask is True where a patch is HIDDEN"),
        ("coin flips", "rather than hiding each patch with probability"),
        ("unsorted", "sort the chosen indices"),
        ("one for all", "one random permutation per image"),
        ("no generator", "draw the noise with the generator"),
    ],
)
def test_random_masking_mistakes(mode, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_random_masking(_masking(mode))


def _patch_loss(mode="good"):
    def masked_patch_loss(predicted, target, mask):
        error = ((predicted - target) ** 2).mean(dim=-1)  # (B, N)
        if mode == "all patches":
            return error.mean()
        if mode == "visible":
            return error[~mask].mean()
        if mode == "sum per patch":
            return ((predicted - target) ** 2).sum(-1)[mask].mean()
        if mode == "per image":
            return torch.stack([e[m].mean() for e, m in zip(error, mask, strict=True)]).mean()
        if mode == "no reduction":
            return error * mask
        return error[mask].mean()

    return masked_patch_loss


def test_masked_patch_loss_check_accepts_good_answers():
    from vitcourse.pretraining import masked_patch_loss

    assert checks.check_masked_patch_loss(masked_patch_loss) is masked_patch_loss
    good = _patch_loss()
    assert checks.check_masked_patch_loss(good) is good


@pytest.mark.parametrize(
    "mode, hint",
    [
        ("all patches", "averages over every patch"),
        ("visible", "averages over the visible patches"),
        ("sum per patch", "sums each patch's squared errors"),
        ("per image", "mean of each image's own mean"),
        ("no reduction", "one error per patch"),
    ],
)
def test_masked_patch_loss_mistakes(mode, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_masked_patch_loss(_patch_loss(mode))


def _distill(mode="good"):
    def distillation_loss(cls_logits, dist_logits, teacher_logits, labels, kind, alpha, tau):
        base = F.cross_entropy(cls_logits, labels)
        if kind == "hard":
            target = teacher_logits.argmax(dim=-1)
            if mode == "teacher probabilities":
                target = teacher_logits.softmax(dim=-1)
            teacher = F.cross_entropy(dist_logits, target)
        else:
            p_teacher = (teacher_logits / tau).softmax(-1)
            log_student = (dist_logits / tau).log_softmax(-1)
            kl = (p_teacher * (p_teacher.log() - log_student)).sum(-1).mean()
            if mode == "KL swapped":
                p_student = log_student.exp()
                kl = (p_student * (log_student - p_teacher.log())).sum(-1).mean()
            teacher = kl if mode == "no tau squared" else kl * tau**2
        if mode == "alpha swapped":
            return alpha * base + (1 - alpha) * teacher
        return (1 - alpha) * base + alpha * teacher

    return distillation_loss


def test_distillation_loss_check_accepts_good_answers():
    from vitcourse.distillation import distillation_loss

    assert checks.check_distillation_loss(distillation_loss) is distillation_loss
    good = _distill()
    assert checks.check_distillation_loss(good) is good


@pytest.mark.parametrize(
    "mode, hint",
    [
        ("teacher probabilities", "trains on the teacher's guesses"),
        ("alpha swapped", "alpha weighs the teacher's part"),
        ("no tau squared", "multiply the KL divergence by tau"),
        ("KL swapped", "the teacher's probabilities are the target"),
    ],
)
def test_distillation_loss_mistakes(mode, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_distillation_loss(_distill(mode))
