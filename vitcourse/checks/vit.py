"""Checks for notebook 05's exercises: the whole `ViT` and `count_parameters` (`vitcourse.vit`)."""

from __future__ import annotations

import dataclasses

import torch

from vitcourse import vit
from vitcourse.checks.answers import type_name
from vitcourse.checks.harness import (
    Hint,
    Mistakes,
    compare,
    fail,
    randomized,
    run_with_reference_weights,
    seeded,
)
from vitcourse.checks.registry import exercise
from vitcourse.language import N_, _, number
from vitcourse.presets import PRESETS
from vitcourse.vit import count_parameters

# The ViT check's tiny model, as the ViTConfig's fields (a plain dict crosses to the learner's side).
_TINY = {
    "image_size": 16,
    "patch_size": 4,
    "in_channels": 3,
    "num_classes": 5,
    "dim": 12,
    "depth": 2,
    "num_heads": 3,
    "mlp_dim": 24,
}


_VIT_MORE = N_(
    "the shapes: images (B, C, H, W) -> patch tokens (B, N, D) -> with the cls token in front and "
    "the positions added (B, T, D) -> every block, then the final norm (B, T, D) -> the cls token "
    "(B, D) -> logits (B, classes). The paper's equations 1 to 4 (section 3.1) are these steps."
)


def _vit_mistakes(r, images) -> Mistakes:
    """The classic slips in a ViT's forward, each as the logits it would give."""
    patches = r.patch_embed(images)
    cls_tok = r.cls_token.expand(2, -1, -1)

    def forward(tokens, pool=lambda t: t[:, 0], final_norm=True):
        for b in r.blocks:
            tokens = b(tokens)
        return r.head(pool(r.norm(tokens) if final_norm else tokens))

    mistakes = [
        (
            Hint(
                N_(
                    "the position embeddings are not added: equation 1 adds E_pos to the "
                    "whole sequence, the cls token included."
                ),
                more=N_("pos_embed is (1, T, D): add it once the cls token is in front."),
            ),
            lambda: forward(torch.cat([cls_tok, patches], 1)),
        ),
        (
            N_("the cls token goes in front (position 0), and the head reads it from there."),
            lambda: forward(torch.cat([patches, cls_tok], 1) + r.pos_embed),
        ),
        (
            N_("the head should classify the cls token, at position 0, not the last token."),
            lambda: forward(
                torch.cat([cls_tok, patches], 1) + r.pos_embed, pool=lambda t: t[:, -1]
            ),
        ),
        (
            Hint(
                N_(
                    "this model pools with the cls token (config.pool == 'cls'): classify "
                    "token 0, not a mean of the tokens."
                ),
                more=N_("equation 4: y = LN(z_L⁰), the final norm of the cls token's output."),
            ),
            lambda: forward(
                torch.cat([cls_tok, patches], 1) + r.pos_embed, pool=lambda t: t.mean(1)
            ),
        ),
        (
            Hint(
                N_(
                    "the final LayerNorm is missing: equation 4 normalises the last block's "
                    "output before the head."
                ),
                more=N_("__init__ built it as norm; it runs once, after the last block."),
            ),
            lambda: forward(torch.cat([cls_tok, patches], 1) + r.pos_embed, final_norm=False),
        ),
    ]
    return mistakes


@exercise("ViT", "05_vision_transformer", vit.VisionTransformer)
class check_vision_transformer:
    """Check a ViT class: `cls(config)` with the reference's submodules, images -> logits."""

    called = N_(
        "images (2, 3, 16, 16), in a ViT(ViTConfig(image_size=16, patch_size=4, dim=12, depth=2, "
        "num_heads=3, num_classes=5)) with the reference's weights"
    )
    raised = [
        (
            "Sizes of tensors must match",
            Hint(
                N_(
                    "the cls token is (1, 1, D), one for the whole model: each of the B images "
                    "needs its own view of it before it can join the (B, N, D) patch tokens."
                ),
                more=N_(
                    "notebook 02's embed_tokens did the same (imported above from "
                    "vitcourse.embedding): `expand` makes B views without copying."
                ),
            ),
        ),
        (
            "is not defined",
            Hint(
                N_("a name your forward uses does not exist in this notebook."),
                more=N_(
                    "embed_tokens, from notebook 02, is imported above from vitcourse.embedding; "
                    "everything else the forward needs is a part __init__ built (self.…)."
                ),
            ),
        ),
    ]
    more = _VIT_MORE
    worked = N_(
        "the shapes for the check's images (2, 3, 16, 16), patch size 4, D = 12 and 5 classes: "
        "patch_embed gives (2, 16, 12); with the cls token in front and the positions added, (2, "
        "17, 12); after each block, (2, 17, 12); after the final norm, (2, 17, 12); the cls "
        "token, (2, 12); the head, (2, 5). Print yours after each step and compare."
    )

    @staticmethod
    def inputs(seed: int) -> dict:
        reference = randomized(vit.VisionTransformer(vit.ViTConfig(**_TINY)), seed)
        return {"weights": reference.state_dict(), "images": seeded(2, 3, 16, 16, seed=seed)}

    @staticmethod
    def run(cls, weights, images):
        return run_with_reference_weights(lambda: cls(vit.ViTConfig(**_TINY)), weights, images)

    @staticmethod
    def judge(got, weights, images) -> None:
        r = vit.VisionTransformer(vit.ViTConfig(**_TINY)).eval()
        r.load_state_dict(weights)
        with torch.no_grad():
            mistakes = _vit_mistakes(r, images)
            compare(
                got,
                r(images),
                mistakes,
                generic=Hint(
                    N_(
                        "follow the four steps above the exercise; they are the paper's equations "
                        "1 to 4."
                    ),
                    more=_VIT_MORE,
                ),
                shape_hints={
                    (2, 17, 5): N_(
                        "the head gives logits for every token: pool to one vector per "
                        "image first (the cls token, at position 0)."
                    ),
                },
            )


def _drawn_config(generator: torch.Generator, **switches) -> vit.ViTConfig:
    """A small ViT whose sizes are drawn from `generator`: a count written as a table of numbers
    cannot know them."""

    def pick(low: int, high: int) -> int:
        return int(torch.randint(low, high + 1, (1,), generator=generator))

    heads, patch = (1, 2, 4)[pick(0, 2)], pick(2, 4)
    dim = 4 * pick(1, 6)  # a multiple of 4, as sin-cos positions need; every head count divides it
    return vit.ViTConfig(
        image_size=patch * pick(2, 4),
        patch_size=patch,
        in_channels=pick(1, 3),
        num_classes=pick(2, 10),
        dim=dim,
        depth=pick(1, 3),
        num_heads=heads,
        mlp_dim=dim * pick(1, 4),
        **switches,
    )


@exercise("count_parameters", "05_vision_transformer", count_parameters)
class check_parameter_count:
    """Check `fn(config) -> int`: a ViT's number of trainable parameters, from its sizes alone.
    The three small configs' sizes are drawn from the check's seed."""

    called = N_(
        "five configs: a small ViT, another without qkv biases, another with sin-cos positions, "
        "course-28/7 and vit-base/16"
    )
    more = N_(
        "build VisionTransformer(config) for the config in the message and count the parameters "
        "of each of its parts (patch_embed, blocks[0], norm, head...) to find the piece you count "
        "differently."
    )
    worked = N_(
        "ViTConfig(image_size=8, patch_size=4, in_channels=1, num_classes=2, dim=4, depth=1, "
        "num_heads=1, mlp_dim=8), piece by piece: patch_embed 1·4·4·4 + 4 = 68; the cls token 4; "
        "the positions (4 + 1)·4 = 20; one block: its two norms 2·(4 + 4) = 16, qkv 4·12 + 12 = "
        "60, proj 4·4 + 4 = 20, mlp 4·8 + 8 + 8·4 + 4 = 76, so 172; the final norm 8; the head "
        "4·2 + 2 = 10: 282 in all, as VisionTransformer(config).num_parameters() says. Run yours "
        "on that config and compare piece by piece."
    )

    @staticmethod
    def inputs(seed: int) -> dict:
        generator = torch.Generator().manual_seed(seed)
        configs = [
            _drawn_config(generator),
            # the two switches that change the count, one model each so each mistake has its hint
            _drawn_config(generator, qkv_bias=False),
            _drawn_config(generator, pos_embed="sincos"),
            PRESETS["course-28/7"],
            PRESETS["vit-base/16"],
        ]
        return {"configs": [dataclasses.asdict(c) for c in configs]}

    @staticmethod
    def run(count_parameters, configs):
        return [count_parameters(vit.ViTConfig(**c)) for c in configs]

    @staticmethod
    def judge(got, configs) -> None:
        if not (isinstance(got, list) and len(got) == len(configs)):
            raise ValueError("an answer that pack did not write")
        models = [vit.ViTConfig(**fields) for fields in configs]
        gaps = []
        for config, answer in zip(models, got, strict=True):
            if type(answer) not in (int, float):
                fail(
                    _(
                        "for {config} it should return the number of parameters, an int, but "
                        "returned {type}"
                    ).format(config=config, type=type_name(answer))
                )
            gaps.append(count_parameters(config) - answer)
        for config, answer, gap in zip(models, got, gaps, strict=True):
            if gap == 0:
                continue
            # Neither the right count nor the gap (which gives it): the hint names the piece.
            if gap > 0:
                said = _("for {config} it gives {answer}: fewer than the model has")
            else:
                said = _("for {config} it gives {answer}: more than the model has")
            said = said.format(config=config, answer=number(answer))
            fail(said, _count_hint(config, gap, models, gaps))


def _count_hint(config: vit.ViTConfig, gap, models: list, gaps: list) -> str:
    """The hint for a count `gap` short of `config`'s model (or, negative, over it); `models` and
    `gaps` are every config's, which tell apart two slips of the same size."""
    D, L = config.dim, config.depth
    if gap > 0:
        # What each piece adds; a learner's count that is off by exactly one of them left it out.
        left_out = {
            N_("the cls token (D numbers)"): D,
            N_("the position embeddings (T x D)"): config.num_tokens * D,
            N_("the LayerNorms (2D each: a gain and a bias; two per block and the final one)"): (
                2 * L + 1
            )
            * 2
            * D,
            N_("the biases (each Linear and the patch projection have one per output)"): D
            + L * ((3 * D if config.qkv_bias else 0) + D + config.mlp_dim + D)
            + config.num_classes,
            N_("the classifier head (D x classes + classes)"): D * config.num_classes
            + config.num_classes,
        }
        if gap == D and config.pos_embed == "learned":
            # D short: the cls token, or the cls token's row of the position table. A model with
            # sin-cos positions (no table counted) tells them apart: right there, it is the row.
            fixed = [g for m, g in zip(models, gaps, strict=True) if m.pos_embed != "learned"]
            if fixed and all(g == 0 for g in fixed):
                return N_(
                    "the position table has T = N + 1 rows, one for the cls token too: you count "
                    "N × D (your count is right for the model with sin-cos positions, which has "
                    "no table)."
                )
            return N_(
                "did you leave out the cls token (D numbers), or the patch embedding's D biases? "
                "Both are D, the number your count is short by."
            )
        said = _("did you leave out {part}?")
        guesses = [said.format(part=_(part)) for part, n in left_out.items() if n == gap]
    else:
        # A count too large by one of these counted it where the config has none.
        counted_extra = {}  # only for the switches this config has off
        if not config.qkv_bias:
            counted_extra[L * 3 * D] = N_(
                "this config has qkv_bias=False: count qkv's 3D biases per block only when "
                "config.qkv_bias is True."
            )
        if config.pos_embed != "learned":
            counted_extra[config.num_tokens * D] = N_(
                "this config's positions are fixed sin-cos values (a buffer, not trained): "
                'count the T x D position embeddings only when config.pos_embed == "learned".'
            )
        guesses = [counted_extra[-gap]] if -gap in counted_extra else []
    return (
        guesses[0]
        if guesses
        else N_(
            "go through the list above the exercise piece by piece, for this config's "
            "switches (qkv_bias, pos_embed)."
        )
    )
