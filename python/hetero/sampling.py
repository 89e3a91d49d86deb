"""``hx_sampling``: how the next token is chosen."""
from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from . import _capi as C

_DEFAULT = C.hx_sampling_default()


@dataclass
class Sampling:
    """hetero's sampler settings (llama.cpp's).  ``temperature`` 0 is greedy;
    ``stop`` strings end generation before them."""

    temperature: float = _DEFAULT.temperature
    top_k: int = _DEFAULT.top_k
    top_p: float = _DEFAULT.top_p
    min_p: float = _DEFAULT.min_p
    repeat_penalty: float = _DEFAULT.repeat_penalty
    repeat_last_n: int = _DEFAULT.repeat_last_n
    frequency_penalty: float = _DEFAULT.frequency_penalty
    presence_penalty: float = _DEFAULT.presence_penalty
    seed: int = _DEFAULT.seed
    stop: List[str] = field(default_factory=list)
    #: GBNF text (llama.cpp's grammar format) the output must follow.
    grammar: Optional[str] = None
    #: llama.cpp's other samplers (hetero.h documents each); their defaults
    #: leave them off.
    logit_bias: Dict[int, float] = field(default_factory=dict)
    min_tokens: int = 0
    typical_p: float = _DEFAULT.typical_p
    mirostat: int = 0
    mirostat_tau: float = _DEFAULT.mirostat_tau
    mirostat_eta: float = _DEFAULT.mirostat_eta
    dry_multiplier: float = 0.0
    dry_base: float = _DEFAULT.dry_base
    dry_allowed_length: int = _DEFAULT.dry_allowed_length
    dry_penalty_last_n: int = _DEFAULT.dry_penalty_last_n
    #: None: llama.cpp's ["\n", ":", "\"", "*"].
    dry_sequence_breakers: Optional[List[str]] = None
    xtc_probability: float = 0.0
    xtc_threshold: float = _DEFAULT.xtc_threshold
    top_n_sigma: float = _DEFAULT.top_n_sigma
    dynatemp_range: float = 0.0
    dynatemp_exponent: float = _DEFAULT.dynatemp_exponent
    #: The chain's order as llama.cpp's letters ("edskypmxt"); None: that.
    samplers: Optional[str] = None
    min_keep: int = 0
    ignore_eos: bool = False
    #: llama.cpp's reasoning budget: None off, else the thought's tokens
    #: before ``reasoning_message`` and the end tag are forced (hetero.h).
    reasoning_budget: Optional[int] = None
    #: The prompt ends by opening the thought: the budget counts from the first token.
    reasoning_open: bool = False
    #: None: "<think>" and "</think>"; the message: none.
    reasoning_start: Optional[str] = None
    reasoning_end: Optional[str] = None
    reasoning_message: Optional[str] = None

    def to_c(self) -> Tuple[C.hx_sampling, object]:
        """The C struct, and what must stay alive while C reads it."""
        s = C.hx_sampling_default()
        s.temperature = self.temperature
        s.top_k = self.top_k
        s.top_p = self.top_p
        s.min_p = self.min_p
        s.repeat_penalty = self.repeat_penalty
        s.repeat_last_n = self.repeat_last_n
        s.frequency_penalty = self.frequency_penalty
        s.presence_penalty = self.presence_penalty
        s.seed = self.seed & 0xFFFFFFFFFFFFFFFF
        stops = [x.encode() if isinstance(x, str) else bytes(x) for x in self.stop]
        arr = (ctypes.c_char_p * max(1, len(stops)))(*stops)
        s.stop = arr if stops else None
        s.n_stop = len(stops)
        gbnf = self.grammar.encode() if self.grammar is not None else None
        s.grammar = gbnf
        bias = (C.hx_logit_bias * max(1, len(self.logit_bias)))()
        for i, (tok, b) in enumerate(self.logit_bias.items()):
            bias[i].token = int(tok)
            bias[i].bias = float(b)
        s.logit_bias = bias if self.logit_bias else None
        s.n_logit_bias = len(self.logit_bias)
        s.min_tokens = self.min_tokens
        s.typical_p = self.typical_p
        s.mirostat = self.mirostat
        s.mirostat_tau = self.mirostat_tau
        s.mirostat_eta = self.mirostat_eta
        s.dry_multiplier = self.dry_multiplier
        s.dry_base = self.dry_base
        s.dry_allowed_length = self.dry_allowed_length
        s.dry_penalty_last_n = self.dry_penalty_last_n
        brk = [x.encode() for x in self.dry_sequence_breakers or []]
        brk_arr = (ctypes.c_char_p * max(1, len(brk)))(*brk)
        s.dry_breakers = brk_arr if self.dry_sequence_breakers is not None else None
        s.n_dry_breakers = len(brk)
        s.xtc_probability = self.xtc_probability
        s.xtc_threshold = self.xtc_threshold
        s.top_n_sigma = self.top_n_sigma
        s.dynatemp_range = self.dynatemp_range
        s.dynatemp_exponent = self.dynatemp_exponent
        order = self.samplers.encode() if self.samplers is not None else None
        s.samplers = order
        s.min_keep = self.min_keep
        s.ignore_eos = int(self.ignore_eos)
        if self.reasoning_budget is not None and self.reasoning_budget < 0:
            raise ValueError(f"reasoning_budget is {self.reasoning_budget}: None (off) or >= 0")
        s.reasoning_budget_on = int(self.reasoning_budget is not None)
        s.reasoning_budget = self.reasoning_budget or 0
        s.reasoning_open = int(self.reasoning_open)
        tags = [x.encode() if x is not None else None
                for x in (self.reasoning_start, self.reasoning_end, self.reasoning_message)]
        s.reasoning_start, s.reasoning_end, s.reasoning_message = tags
        return s, (arr, stops, gbnf, bias, brk, brk_arr, order, tags)
