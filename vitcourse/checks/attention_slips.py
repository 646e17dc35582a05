"""The classic slips in notebook 03's two exercises, each as what it would output: the mistakes
`checks.attention` matches a wrong answer against, with the hint for each.

`weight_mistakes` holds the slips in scaled dot-product attention's weights (the scale, the
softmax's axis, a transpose), `mhsa_mistakes` those in a multi-head module (the head split and
merge, the projection, the scale per head). Each hint is one whole message for its translator:
Vaswani et al.'s equation 1 is written out in each one that quotes it.
"""

from __future__ import annotations

import math

from vitcourse.checks.harness import Hint, Mistakes
from vitcourse.language import N_

# --- attention's weights ------------------------------------------------------------------------

UNSCALED = Hint(
    N_(
        "the scores are not scaled: Vaswani et al. (2017), equation 1: softmax(q·kᵀ / "
        "√d) over the keys, times v. d is the width of q and k."
    ),
    more=N_(
        "without the division the softmax saturates as d grows (section 2 of "
        "this notebook measured it); d is the size of q's last axis."
    ),
)
SCALE_WRITTEN_IN = Hint(
    N_(
        "the scale is written into your code: take d from q's last axis (the check tries d = "
        "8, then 4)."
    ),
    more=N_("q.shape[-1] is the width of each query."),
)
BY_D = Hint(
    N_("divide by √d, not by d: the scores' spread grows like √d."),
    more=N_(
        "section 2 of this notebook: the spread of q·k is √d for q and k of "
        "spread 1; dividing by √d brings it back to 1."
    ),
)
BY_T = Hint(
    N_(
        "the scores are divided by √T, the number of tokens: divide by √d, the width "
        "of q and k (the size of their last axis)."
    ),
    more=N_(
        "the spread of q·k grows with the number of products it sums, d, whatever "
        "the number of tokens."
    ),
)
SOFTMAX_AXIS = Hint(
    N_("the softmax is over the wrong axis: each query's weights over the keys must sum to 1."),
    more=N_(
        "in the (…, T, T) scores, rows are queries and columns keys: normalise "
        "along the keys' axis, the last one."
    ),
)
SCORES_TRANSPOSED = Hint(
    N_("the scores are transposed: row i should be query i against every key."),
    more=N_(
        "the first factor of the product gives the rows: the queries, then the keys transposed."
    ),
)
WEIGHTS_TRANSPOSED = Hint(
    N_("the weights are transposed: row i should be query i's weights over the keys."),
    more=N_("return the weights as the softmax produced them, rows for queries."),
)


def weight_mistakes(scores, d: int) -> Mistakes:
    """The classic slips in attention's weights, from the unscaled scores q @ kᵀ (T x T) of
    queries and keys d numbers wide."""
    T = scores.shape[-1]
    scaled = scores / math.sqrt(d)
    return [
        (UNSCALED, lambda: scores.softmax(-1)),
        (BY_D, lambda: (scores / d).softmax(-1)),
        (BY_T, lambda: (scores / math.sqrt(T)).softmax(-1)),
        (SOFTMAX_AXIS, lambda: scaled.softmax(-2)),
        (SCORES_TRANSPOSED, lambda: (scores.transpose(-2, -1) / math.sqrt(d)).softmax(-1)),
        (WEIGHTS_TRANSPOSED, lambda: scaled.softmax(-1).transpose(-2, -1)),
    ] + [  # a width written into the code: the check's other d, or a usual head width
        (SCALE_WRITTEN_IN, lambda w=w: (scores / math.sqrt(w)).softmax(-1))
        for w in (8, 4, 16, 32, 64)
        if w != d
    ]


# --- multi-head attention -----------------------------------------------------------------------

SPLIT = N_(
    "split the last axis into (h, d) first, so that each token keeps its own numbers, then move "
    "the head axis in front of the token axis."
)
# The hints for heads split (and merged) by a reshape alone: the first two of `mhsa_mistakes`.
SPLIT_NAIVELY = Hint(
    N_(
        "the heads are split without moving the head axis: a reshape straight to "
        "(B, h, T, d) gives each head numbers from several tokens."
    ),
    more=SPLIT,
)
MERGED_NAIVELY = Hint(
    N_(
        "the heads are split (and merged) without moving the head axis: a reshape "
        "straight to (B, h, T, d) gives each head numbers from several tokens."
    ),
    more=N_(
        "split the last axis into (h, d) first, so that each token keeps its own "
        "numbers, then move the head axis in front of the token axis. Undo both steps "
        "when merging."
    ),
)
MERGED_UNMOVED = Hint(
    N_(
        "the heads are merged without moving the head axis back: (B, h, T, d) must "
        "become (B, T, h, d) before the heads join into D numbers per token."
    ),
    more=N_("swap the head and token axes back, then merge the last two."),
)
NO_PROJECTION = Hint(
    N_(
        "the output projection is missing: proj mixes the heads' results, the "
        "last of the four steps."
    ),
    more=N_("proj is a Linear(D, D) applied to the merged (B, T, D) tokens."),
)
BY_WIDTH = Hint(
    N_("scale by √d with d = D / h, the width of one head, not by √D."),
    more=N_(
        "each head's queries and keys are d numbers wide: that is the width equation 1 divides by."
    ),
)
HEADS_UNSCALED = N_("the scores are not scaled by √d (Vaswani et al., equation 1).")
HEADS_BY_T = N_(
    "the scores are divided by √T, the number of tokens: divide by √d, the width of "
    "one head's queries and keys."
)
LAYOUT = Hint(
    N_(
        "qkv's 3D numbers per token are laid out (3, h, d): first all of q's, then "
        "k's, then v's, each split into h heads of d. Reading them as (h, 3, d) mixes "
        "q, k and v."
    ),
    more=N_("split (B, T, 3D) into (B, T, 3, h, d), then move the axes to get (3, B, h, T, d)."),
)
HEADS_WRITTEN_IN = Hint(
    N_(
        "the number of heads is written into your code: take it from "
        "self.num_heads (the check builds modules with 3 heads, then 2)."
    ),
    more=N_("__init__ keeps num_heads and head_dim on self: read them in forward."),
)


def mhsa_mistakes(reference, x) -> Mistakes:
    """The classic multi-head slips, each as what it would output (`reference` holds the weights)."""
    B, T, D = x.shape
    h = reference.num_heads
    d = D // h
    qkv = reference.qkv(x)  # (B, T, 3D)
    right = qkv.reshape(B, T, 3, h, d).permute(2, 0, 3, 1, 4)  # (3, B, h, T, d)
    naive = qkv.reshape(B, T, 3, D).permute(2, 0, 1, 3).reshape(3, B, h, T, d)  # no head axis move
    h_first = qkv.reshape(B, T, h, 3, d).permute(3, 0, 2, 1, 4)  # laid out (h, 3, d) per token
    # a head count written into the code: any other that divides D
    others = [g for g in (1, 2, 3, 4, 6, 8) if g != h and D % g == 0]
    split = [qkv.reshape(B, T, 3, g, D // g).permute(2, 0, 3, 1, 4) for g in others]

    def attend(q, k, v, scale=None):
        scale = math.sqrt(q.shape[-1]) if scale is None else scale
        return ((q @ k.transpose(-2, -1)) / scale).softmax(-1) @ v  # (B, h, T, d)

    def merge(out):
        return out.transpose(1, 2).reshape(B, T, D)

    return [
        (SPLIT_NAIVELY, lambda: reference.proj(merge(attend(*naive)))),
        (MERGED_NAIVELY, lambda: reference.proj(attend(*naive).reshape(B, T, D))),
        (MERGED_UNMOVED, lambda: reference.proj(attend(*right).reshape(B, T, D))),
        (NO_PROJECTION, lambda: merge(attend(*right))),
        (BY_WIDTH, lambda: reference.proj(merge(attend(*right, scale=math.sqrt(D))))),
        (HEADS_UNSCALED, lambda: reference.proj(merge(attend(*right, scale=1.0)))),
        (HEADS_BY_T, lambda: reference.proj(merge(attend(*right, scale=math.sqrt(T))))),
        (LAYOUT, lambda: reference.proj(merge(attend(*h_first)))),
    ] + [(HEADS_WRITTEN_IN, lambda qkv=qkv: reference.proj(merge(attend(*qkv)))) for qkv in split]
