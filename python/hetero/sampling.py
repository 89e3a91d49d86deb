"""``hx_sampling``: how the next token is chosen."""
from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

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
        return s, (arr, stops, gbnf)
