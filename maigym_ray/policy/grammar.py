"""Token masks of a regex: which tokens a constrained engine allowed at each step of a reply.

Under ``policy.action_space`` the engine samples every reply through a grammar (vLLM's structured outputs,
whose regex backend is xgrammar), so the policy that acted is the model's distribution renormalised over the
allowed tokens. A trainer that scores those tokens with the full softmax trains another policy: the ratio to the
sampled logprobs is off from the first step, and it is unbounded on tokens the grammar forced. ``TokenGrammar``
rebuilds the engine's masks from the regex the reply was sampled under (``Turn.constraint``) with the same
library, tokenizer and stop tokens, so the trainer can score the policy that acted.

Pure logic (no Ray); xgrammar is vLLM's dependency and is imported on first use.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch


class TokenGrammar:
    """The allowed-token masks of replies sampled under a regex, for one tokenizer and vocabulary.

    ``stop_token_ids`` must be the engine's (vLLM stops on the tokenizer's EOS and the generation config's
    ``eos_token_id``; :meth:`from_model_dir` reads both), since the grammar allows a stop token exactly where the
    regex may end.
    """

    def __init__(
        self,
        tokenizer: Any,
        vocab_size: int,
        stop_token_ids: Sequence[int],
        cache_size: int = 256,
        mask_cache_bytes: int = 256 * 2**20,
    ) -> None:
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size
        self.stop_token_ids = sorted(set(stop_token_ids))
        self.cache_size = cache_size
        self._compiler: Any = None
        self._compiled: OrderedDict[str, Any] = OrderedDict()
        # A round trains each reply in several passes (and the "round" recompute): its masks are built once.
        # The bound is in bytes, not replies: a reply's masks are [L, V] bools, and with a real vocabulary
        # (~150k) a few thousand replies would hold gigabytes.
        self.mask_cache_bytes = mask_cache_bytes
        self._masks: OrderedDict[tuple[str, tuple[int, ...]], torch.Tensor] = OrderedDict()
        self._mask_bytes = 0
        #: distinct replies with a token the grammar would not have allowed, since this object was made
        #: (see :meth:`allowed`).
        self.mismatches = 0

    @classmethod
    def from_model_dir(cls, model_dir: str | Path) -> TokenGrammar:
        """The grammar of the HF model in ``model_dir`` (its tokenizer, vocabulary size and stop tokens)."""
        from transformers import AutoConfig, AutoTokenizer

        tok = AutoTokenizer.from_pretrained(model_dir)
        config = AutoConfig.from_pretrained(model_dir)
        vocab = getattr(config, "vocab_size", None) or config.get_text_config().vocab_size
        stops = {tok.eos_token_id} if tok.eos_token_id is not None else set()
        gen = Path(model_dir) / "generation_config.json"
        if gen.exists():
            eos = json.loads(gen.read_text()).get("eos_token_id")
            stops |= set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        return cls(tok, int(vocab), sorted(stops))

    def _compile(self, regex: str) -> Any:
        import xgrammar as xgr

        if self._compiler is None:
            info = xgr.TokenizerInfo.from_huggingface(
                self.tokenizer, vocab_size=self.vocab_size, stop_token_ids=self.stop_token_ids
            )
            self._compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        if regex in self._compiled:
            self._compiled.move_to_end(regex)
            return self._compiled[regex]
        compiled = self._compiler.compile_regex(regex)
        self._compiled[regex] = compiled
        while len(self._compiled) > self.cache_size:
            self._compiled.popitem(last=False)
        return compiled

    def allowed(self, regex: str, tokens: Sequence[int]) -> torch.Tensor:
        """[len(tokens), vocab_size] bool: row i holds the tokens the grammar allowed in place of ``tokens[i]``,
        after ``tokens[:i]``.

        A token the grammar would not have allowed means the reply was not sampled under this regex (or under
        another backend's reading of it); from that token on the rows allow everything, so the trainer falls
        back to the model's full distribution there instead of a logprob of -inf. ``mismatches`` counts such
        replies. The masks of recent replies are kept: the same reply costs its matcher run once.
        """
        key = (regex, tuple(int(t) for t in tokens))
        if key in self._masks:
            self._masks.move_to_end(key)
            return self._masks[key]
        out = self._match(regex, key[1])
        self._masks[key] = out
        self._mask_bytes += out.numel()
        while self._mask_bytes > self.mask_cache_bytes and len(self._masks) > 1:
            self._mask_bytes -= self._masks.popitem(last=False)[1].numel()
        return out

    def _match(self, regex: str, tokens: tuple[int, ...]) -> torch.Tensor:
        import xgrammar as xgr

        out = torch.ones((len(tokens), self.vocab_size), dtype=torch.bool)
        matcher = xgr.GrammarMatcher(self._compile(regex), override_stop_tokens=self.stop_token_ids)
        bitmask = xgr.allocate_token_bitmask(1, self.vocab_size)
        shifts = torch.arange(32, dtype=torch.int32)
        for i, tok in enumerate(tokens):
            if matcher.is_terminated():
                self.mismatches += 1
                return out
            matcher.fill_next_token_bitmask(bitmask, 0)
            row = ((bitmask[0].unsqueeze(-1) >> shifts) & 1).bool().flatten()[: self.vocab_size]
            if not bool(row[tok]) or not matcher.accept_token(tok):
                self.mismatches += 1
                return out
            out[i] = row
        return out
