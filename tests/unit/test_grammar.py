"""TokenGrammar (policy/grammar.py): the token masks of a regex, as a constrained engine applies them."""

from __future__ import annotations

import pytest

from maigym_ray.harness.action_space import action_regex
from maigym_ray.policy.grammar import TokenGrammar

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def grammar(tmp_path_factory):
    from maigym_ray.policy.tiny_models import build_text_model

    return TokenGrammar.from_model_dir(build_text_model(tmp_path_factory.mktemp("m") / "text"))


def _decode(grammar, row) -> set[str]:
    return {grammar.tokenizer.decode([i]) for i in row.nonzero().flatten().tolist()}


def test_the_masks_allow_what_the_regex_allows_and_stop_only_at_its_end(grammar):
    regex = action_regex(["click", "terminate"], ["12", "37"])
    tok = grammar.tokenizer
    ids = [*tok.encode('click(id="37")', add_special_tokens=False), tok.eos_token_id]
    masks = grammar.allowed(regex, ids)
    assert masks.shape == (len(ids), grammar.vocab_size) and grammar.mismatches == 0
    assert all(bool(masks[i, t]) for i, t in enumerate(ids))  # every sampled token was allowed
    assert (masks.sum(-1) < grammar.vocab_size).all()
    # the first digit of the id: the on-screen ids' first digits (and multi-digit tokens that start them) only
    at = ids.index(tok.convert_tokens_to_ids("3"))
    assert {s[0] for s in _decode(grammar, masks[at])} == {"1", "3"}
    # a stop token only once the action is complete
    stops = set(grammar.stop_token_ids)
    assert all(not any(bool(m[s]) for s in stops) for m in masks[:-1])
    assert bool(masks[-1, tok.eos_token_id]) and masks[-1].sum() == len(stops)


def test_a_reply_outside_the_regex_falls_back_to_the_full_vocabulary_and_is_counted(grammar):
    regex = action_regex(["click"], ["12", "37"])
    tok = grammar.tokenizer
    ids = tok.encode('click(id="99")', add_special_tokens=False)
    before = grammar.mismatches
    masks = grammar.allowed(regex, ids)
    bad = next(i for i, t in enumerate(ids) if tok.decode([t]).startswith("9"))
    assert (masks[:bad].sum(-1) < grammar.vocab_size).all()
    assert masks[bad:].all()  # from the first token the grammar would not have sampled: no mask
    assert grammar.mismatches == before + 1
    # a reply trained in several passes is matched once: the same masks, counted once
    assert grammar.allowed(regex, ids) is masks and grammar.mismatches == before + 1


def test_stop_tokens_come_from_the_tokenizer_and_the_generation_config(grammar):
    gen_eos = 2  # tiny_models writes eos_token_id [2, 0] into generation_config.json
    assert set(grammar.stop_token_ids) == {grammar.tokenizer.eos_token_id, gen_eos}


def test_the_mask_cache_is_bounded_in_bytes_and_evicts_the_oldest_reply(grammar):
    small = TokenGrammar(grammar.tokenizer, grammar.vocab_size, grammar.stop_token_ids)
    regex = action_regex(["click"], ["12", "37"])
    first, second = (grammar.tokenizer.encode(f'click(id="{i}")', add_special_tokens=False) for i in (12, 37))
    small.mask_cache_bytes = len(first) * small.vocab_size  # room for one reply's masks
    kept = small.allowed(regex, first)
    assert small.allowed(regex, first) is kept
    small.allowed(regex, second)  # over the bound: the first reply goes
    assert small.allowed(regex, first) is not kept
    assert small._mask_bytes <= max(len(first), len(second)) * small.vocab_size
