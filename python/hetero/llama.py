"""``Llama``: llama-cpp-python's class, on hetero.

Code written for llama-cpp-python runs with ``from hetero import Llama``
in place of ``from llama_cpp import Llama``: the same constructor and
methods, the same OpenAI-shaped dicts and streams.  An argument hetero
cannot honour is refused with :class:`~hetero.errors.UnsupportedArgument`
naming it, never ignored; README.md lists them.
"""
from __future__ import annotations

import os
import random
import sys
import time
import uuid
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

import numpy as np

from . import chat, errors
from .grammar import gbnf_of, response_format_gbnf
from ._stream import Piece, iterate, run
from .model import UNTIL_END, Model, Session
from .runtime import Runtime
from .sampling import Sampling

LLAMA_DEFAULT_SEED = 0xFFFFFFFF
_SPLIT_MODE_LAYER = 1
_UNSPECIFIED = -1
# ggml type ids of llama-cpp-python's type_k / type_v, as hetero's kv_type.
_GGML_KV_TYPES = {0: "f32", 1: "f16", 2: "q4_0", 8: "q8_0"}
# llama-cpp-python's pooling types (LLAMA_POOLING_TYPE_*); unspecified is
# none, as llama.cpp's default for a LLaMA-family model.
_POOLING = {-1: "none", 0: "none", 1: "mean", 2: "cls", 3: "last"}


def _refuse(name: str, value: Any, why: str) -> None:
    raise errors.UnsupportedArgument(name, f"{value!r}: {why}")


class Llama:
    """A GGUF model and its context, as llama-cpp-python's ``Llama``.

    hetero's own choices come as keyword arguments too: ``devices`` (which
    devices to open, hetero.Runtime's), ``sched``, ``partition``,
    ``kv_type`` and ``kv_tokens`` (the KV pool shared by calls running at
    once from several threads; 0 = n_ctx, room for one whole context: a
    call reserves its prompt and max_tokens, and one that finds too little
    free raises HeteroMemoryError).  ``n_gpu_layers`` maps onto devices: 0 runs on the CPU
    only; -1, or at least the model's layer count, opens every device,
    each task going where hetero's partition prefers (``placement`` says
    what was done)."""

    def __init__(
        self,
        model_path: str,
        *,
        n_gpu_layers: int = 0,
        split_mode: int = _SPLIT_MODE_LAYER,
        main_gpu: int = 0,
        tensor_split: Optional[List[float]] = None,
        vocab_only: bool = False,
        use_mmap: bool = True,
        use_mlock: bool = False,
        kv_overrides: Optional[Dict[str, Union[bool, int, float, str]]] = None,
        seed: int = LLAMA_DEFAULT_SEED,
        n_ctx: int = 512,
        n_batch: int = 512,
        n_ubatch: int = 512,
        n_threads: Optional[int] = None,
        n_threads_batch: Optional[int] = None,
        rope_scaling_type: Optional[int] = _UNSPECIFIED,
        pooling_type: int = _UNSPECIFIED,
        attention_type: int = _UNSPECIFIED,
        rope_freq_base: float = 0.0,
        rope_freq_scale: float = 0.0,
        yarn_ext_factor: float = -1.0,
        yarn_attn_factor: float = 1.0,
        yarn_beta_fast: float = 32.0,
        yarn_beta_slow: float = 1.0,
        yarn_orig_ctx: int = 0,
        logits_all: bool = False,
        embedding: bool = False,
        offload_kqv: bool = True,
        flash_attn: bool = False,
        op_offload: Optional[bool] = None,
        swa_full: Optional[bool] = None,
        no_perf: bool = False,
        last_n_tokens_size: int = 64,
        lora_base: Optional[str] = None,
        lora_scale: float = 1.0,
        lora_path: Optional[str] = None,
        numa: Union[bool, int] = False,
        chat_format: Optional[str] = None,
        chat_handler: Any = None,
        draft_model: Any = None,
        tokenizer: Any = None,
        type_k: Optional[int] = None,
        type_v: Optional[int] = None,
        spm_infill: bool = False,
        verbose: bool = True,
        # hetero's own
        devices: Optional[str] = None,
        sched: Optional[str] = None,
        partition: Optional[str] = None,
        kv_type: Optional[str] = None,
        kv_tokens: int = 0,
        **kwargs: Any,
    ):
        if kwargs:
            raise TypeError(f"Llama() got unexpected keyword argument(s): {', '.join(sorted(kwargs))}")
        self.verbose = verbose
        self.model_path = model_path
        if not os.path.exists(model_path):
            raise ValueError(f"Model path does not exist: {model_path}")
        self._check_init(locals())
        if type_k is not None or type_v is not None:
            if type_k != type_v:
                _refuse("type_k", (type_k, type_v), "hetero's KV cache has one type for K and V")
            if type_k not in _GGML_KV_TYPES:
                _refuse("type_k", type_k, f"hetero's KV cache types are {sorted(_GGML_KV_TYPES)} (ggml ids)")
            if kv_type is not None:
                _refuse("type_k", type_k, "give type_k/type_v or kv_type, not both")
            kv_type = _GGML_KV_TYPES[type_k]
        if n_threads is not None and n_threads < 0:
            # llama-cpp-python's -1 means "the default".
            n_threads = None
        if n_threads_batch is not None and n_threads_batch not in (-1, n_threads):
            _refuse("n_threads_batch", n_threads_batch, "hetero's CPU team is the same for prompts and decoding: "
                    "give n_threads alone")
        if n_ubatch < n_batch:
            _refuse("n_ubatch", n_ubatch, "hetero evaluates up to n_batch tokens at once (its max_batch); "
                    "n_ubatch below n_batch has no counterpart")
        if pooling_type not in _POOLING:
            _refuse("pooling_type", pooling_type, "hetero pools embeddings as none (0), mean (1), cls (2) or "
                    "last (3)")
        self._pooling = _POOLING[pooling_type]
        self._embedding = embedding
        if n_ctx < 0 or n_batch <= 0:
            raise ValueError(f"n_ctx {n_ctx} / n_batch {n_batch} out of range")
        if devices is not None and n_gpu_layers != 0:
            _refuse("n_gpu_layers", n_gpu_layers, "give devices= or n_gpu_layers, not both")
        if devices is None:
            devices = "cpu" if n_gpu_layers == 0 else "all"

        self.n_threads = n_threads or 0
        self.n_batch = n_batch
        self.last_n_tokens_size = last_n_tokens_size
        self._logits_all = logits_all
        self.set_seed(seed)
        self.runtime = Runtime(devices=devices, cpu_threads=self.n_threads, sched=sched)
        try:
            self._model = Model(self.runtime, model_path, n_ctx=n_ctx, max_batch=n_batch, kv_type=kv_type,
                                partition=partition, kv_tokens=kv_tokens)
        except BaseException:
            self.runtime.close()
            raise
        self._session: Optional[Session] = None  # eval()'s
        try:
            self._after_load(n_gpu_layers, devices, chat_format)
        except BaseException:
            self.close()  # the model and runtime now, not at the next collection
            raise
        info = self._model.info
        self._scores_all: Optional[np.ndarray] = None
        self.input_ids: List[int] = []
        self.metadata = {"general.name": info.name, "general.architecture": info.arch}
        if self._model.chat_template is not None:
            self.metadata["tokenizer.chat_template"] = self._model.chat_template
        if verbose:
            print(f"hetero: {info.name} ({info.arch}, {info.ftype}, {info.n_params / 1e6:.0f}M parameters), "
                  f"n_ctx {info.n_ctx}, {self.placement}; chat template {self._chat_template_name}",
                  file=sys.stderr)

    # -- construction ----------------------------------------------------
    def _after_load(self, n_gpu_layers: int, devices: str, chat_format: Optional[str]) -> None:
        n_layer = self._model.info.n_layer
        if 0 < n_gpu_layers < n_layer:
            _refuse("n_gpu_layers", n_gpu_layers,
                    f"hetero places each task on a device, not a count of layers: use 0 (the CPU alone) or -1 "
                    f"(every device; this model has {n_layer} layers), or devices=")
        self.n_threads = self.n_threads or next((d.compute_units for d in self.runtime.devices()
                                                 if d.family_name == "cpu"), 0)
        self.placement = self._describe_placement(n_gpu_layers, devices)
        self.chat_format = chat_format
        self._chat_template = self._pick_template(chat_format)

    @staticmethod
    def _check_init(a: Dict[str, Any]) -> None:
        """Refuses the constructor arguments hetero cannot honour."""
        fixed = [
            ("split_mode", _SPLIT_MODE_LAYER, "hetero splits work by task (partition=), not by llama.cpp's modes"),
            ("main_gpu", 0, "hetero chooses devices by devices= and partition="),
            ("tensor_split", None, "hetero does not split tensors across GPUs by ratio"),
            ("vocab_only", False, "hetero loads a whole model (hetero.Model tokenizes too)"),
            ("use_mmap", True, "hetero always maps the file"),
            ("use_mlock", False, "hetero does not lock the mapping in memory"),
            ("kv_overrides", None, "hetero does not override metadata keys"),
            ("rope_scaling_type", _UNSPECIFIED, "RoPE settings come from the file"),
            ("attention_type", _UNSPECIFIED, "hetero's attention is causal"),
            ("rope_freq_base", 0.0, "RoPE settings come from the file"),
            ("rope_freq_scale", 0.0, "RoPE settings come from the file"),
            ("yarn_ext_factor", -1.0, "hetero has no YaRN"),
            ("yarn_attn_factor", 1.0, "hetero has no YaRN"),
            ("yarn_beta_fast", 32.0, "hetero has no YaRN"),
            ("yarn_beta_slow", 1.0, "hetero has no YaRN"),
            ("yarn_orig_ctx", 0, "hetero has no YaRN"),
            ("offload_kqv", True, "where the KV cache lives follows the partition (partition=)"),
            ("flash_attn", False, "hetero has one attention kernel per device; there is nothing to switch"),
            ("op_offload", None, "where operations run follows the partition (partition=)"),
            ("swa_full", None, "hetero keeps what a sliding window needs"),
            ("lora_base", None, "hetero has no LoRA adapters"),
            ("lora_path", None, "hetero has no LoRA adapters"),
            ("lora_scale", 1.0, "hetero has no LoRA adapters"),
            ("numa", False, "hetero places memory and threads by NUMA node itself"),
            ("chat_handler", None, "hetero formats chats with its chat templates (chat_format=)"),
            ("draft_model", None, "hetero has no speculative decoding"),
            ("tokenizer", None, "hetero tokenizes with the model's own vocabulary"),
            ("spm_infill", False, "hetero has no infill"),
        ]
        for name, default, why in fixed:
            if a[name] != default:
                _refuse(name, a[name], why)

    def _describe_placement(self, n_gpu_layers: int, devices: str) -> str:
        devs = self.runtime.devices()
        names = ", ".join(f"{d.kind_name} ({d.family_name}) {d.name}" for d in devs)
        what = f"n_gpu_layers={n_gpu_layers}: devices {devices!r}" if n_gpu_layers else f"devices {devices!r}"
        s = f"{what} -> {names}"
        if n_gpu_layers and not any(d.kind_name == "gpu" for d in devs):
            why = self.runtime.absence_reason("cuda")
            s += f" (no GPU{': ' + why if why else ''})"
        return s

    def _pick_template(self, chat_format: Optional[str]) -> str:
        if chat_format is not None:
            tmpl = chat.LLAMA_CPP_PYTHON_FORMATS.get(chat_format, chat_format)
            try:
                self._chat_template_name = chat.template_name(tmpl)
            except errors.HeteroError:
                _refuse("chat_format", chat_format, "hetero's chat templates are: " + ", ".join(chat.builtins()) +
                        " (and llama-cpp-python's " + ", ".join(chat.LLAMA_CPP_PYTHON_FORMATS) + ")")
            return tmpl
        tmpl = self._model.chat_template
        if tmpl is None:
            self._chat_template_name = "chatml (the model has none; llama.cpp's choice)"
            return "chatml"
        try:
            self._chat_template_name = chat.template_name(tmpl) + " (the model's)"
        except errors.HeteroError as e:
            # Said at the first chat completion, which cannot run.
            self._chat_template_name = f"none ({e.message})"
        return tmpl

    # -- llama-cpp-python's accessors --------------------------------------
    @property
    def model(self) -> Model:
        """hetero's Model (llama-cpp-python returns its llama_model pointer)."""
        return self._model

    def n_ctx(self) -> int:
        return self._model.info.n_ctx

    def n_embd(self) -> int:
        return self._model.info.n_embd

    def n_vocab(self) -> int:
        return self._model.info.n_vocab

    def token_eos(self) -> int:
        return self._model.info.eos

    def token_bos(self) -> int:
        return self._model.info.bos

    def token_nl(self) -> int:
        ids = self._model.tokenize(b"\n", add_special=False)
        return ids[-1]

    def set_seed(self, seed: int) -> None:
        """Seeds the draws of calls that give no seed of their own
        (LLAMA_DEFAULT_SEED or -1: a random seed)."""
        if seed in (LLAMA_DEFAULT_SEED, -1):
            seed = int.from_bytes(os.urandom(8), "little")
        self.seed = seed
        self._rng = random.Random(seed)

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> List[int]:
        """Token ids of ``text`` (bytes); add_bos: BOS (and EOS) where the
        model asks; special: text spelling a special token is that token."""
        if isinstance(text, str):
            raise TypeError("tokenize takes bytes (text.encode('utf-8')), as llama-cpp-python's does")
        return self._model.tokenize(text, add_special=add_bos, parse_special=special)

    def detokenize(self, tokens: List[int], prev_tokens: Optional[List[int]] = None,
                   special: bool = False) -> bytes:
        """The bytes of the tokens (prev_tokens is not needed: as
        llama-cpp-python's default tokenizer, pieces are concatenated)."""
        return self._model.detokenize(tokens, special=special)

    # -- low level: eval / reset / generate ---------------------------------
    @property
    def n_tokens(self) -> int:
        return len(self.input_ids)

    def reset(self) -> None:
        """Forgets what eval() evaluated."""
        if self._session is not None:
            self._session.close()
            self._session = None
        self.input_ids = []

    def eval(self, tokens: Sequence[int]) -> None:
        """Appends tokens to the context that eval() keeps.  As
        llama-cpp-python, ``scores[i]`` then holds position i's logits: every
        token's with logits_all, else the last one's."""
        tokens = [int(t) for t in tokens]
        if self._session is None:
            self._session = self._model.session()
        self._session.eval(tokens, logits_all=self._logits_all)
        if self._scores_all is None:
            self._scores_all = np.zeros((self.n_ctx(), self.n_vocab()), dtype=np.single)
        n0 = len(self.input_ids)
        rows = range(len(tokens)) if self._logits_all else [len(tokens) - 1]
        for i in rows:
            self._scores_all[n0 + i] = self._session.logits(i if self._logits_all else -1)
        self.input_ids.extend(tokens)

    @property
    def scores(self) -> np.ndarray:
        """[n_ctx, n_vocab] logits of the positions eval() evaluated (a row
        is zero where none was kept)."""
        if self._scores_all is None:
            self._scores_all = np.zeros((self.n_ctx(), self.n_vocab()), dtype=np.single)
        return self._scores_all

    @property
    def _scores(self) -> np.ndarray:
        return self.scores[: self.n_tokens]

    def generate(self, tokens: Sequence[int], top_k: int = 40, top_p: float = 0.95, min_p: float = 0.05,
                 typical_p: float = 1.0, temp: float = 0.80, repeat_penalty: float = 1.0, reset: bool = True,
                 frequency_penalty: float = 0.0, presence_penalty: float = 0.0, tfs_z: float = 1.0,
                 mirostat_mode: int = 0, mirostat_tau: float = 5.0, mirostat_eta: float = 0.1,
                 penalize_nl: bool = True, logits_processor: Any = None, stopping_criteria: Any = None,
                 grammar: Any = None) -> Iterator[int]:
        """Yields the tokens sampled after ``tokens``, up to an
        end-of-generation token (yielded too) or a full context; stop
        iterating to end.  Its context is its own (``reset=False``, which
        would continue eval()'s, is refused)."""
        self._check_sampling(typical_p, tfs_z, mirostat_mode, logits_processor, grammar, None, stopping_criteria)
        if not reset:
            _refuse("reset", reset, "each generation runs on a session of its own (hetero's prefix cache "
                    "reuses the prompt's evaluated blocks)")
        self._drop_eval_context()
        if not penalize_nl:
            _refuse("penalize_nl", penalize_nl, "hetero's repeat penalty treats every token alike")
        smp = self._sampling(temp, top_p, top_k, min_p, repeat_penalty, frequency_penalty, presence_penalty,
                             None, None, grammar, typical_p, mirostat_mode, mirostat_tau, mirostat_eta)
        with self._model.session() as s:
            for item in iterate(s, list(tokens), UNTIL_END, smp):
                if isinstance(item, Piece) and item.token >= 0:
                    yield item.token

    def _drop_eval_context(self) -> None:
        # As in llama-cpp-python, a generation replaces what eval() built
        # (one context): its KV blocks go back to the pool, which holds
        # n_ctx tokens (kv_tokens=) for everything running at once.
        if self._session is not None:
            self.reset()

    @classmethod
    def from_pretrained(cls, repo_id: str, filename: Optional[str] = None, *args: Any, **kwargs: Any) -> "Llama":
        """Not available: hetero reads local files only (model_path=)."""
        raise errors.UnsupportedError(errors.ERR_UNSUPPORTED, "hetero downloads nothing; give a local GGUF file "
                                      "as model_path", "Llama.from_pretrained")

    # -- completions -------------------------------------------------------
    @staticmethod
    def _check_sampling(typical_p: float, tfs_z: float, mirostat_mode: int, logits_processor: Any,
                        grammar: Any, logit_bias: Any, stopping_criteria: Any = None, suffix: Any = None) -> None:
        if tfs_z != 1.0:
            _refuse("tfs_z", tfs_z, "hetero's sampler has no tail-free sampling (llama.cpp dropped it too)")
        if mirostat_mode not in (0, 1, 2):
            raise ValueError(f"mirostat_mode {mirostat_mode} is not 0 (off), 1 or 2")
        if logits_processor is not None:
            _refuse("logits_processor", logits_processor, "hetero samples in C; no Python logits processors")
        if stopping_criteria is not None:
            _refuse("stopping_criteria", stopping_criteria, "hetero stops at stop strings and "
                    "end-of-generation tokens (stop=)")
        if suffix is not None:
            _refuse("suffix", suffix, "hetero has no infill")

    def _sampling(self, temperature: float, top_p: float, top_k: int, min_p: float, repeat_penalty: float,
                  frequency_penalty: float, presence_penalty: float, seed: Optional[int],
                  stop: Optional[Union[str, List[str]]], grammar: Any = None, typical_p: float = 1.0,
                  mirostat_mode: int = 0, mirostat_tau: float = 5.0, mirostat_eta: float = 0.1,
                  logit_bias: Optional[Dict[Any, float]] = None) -> Sampling:
        stops = [stop] if isinstance(stop, str) else list(stop or [])
        bias = {}
        for k, v in (logit_bias or {}).items():  # llama-cpp-python's {token id: bias}; JSON gives str keys
            try:
                tok = int(k)
            except (TypeError, ValueError):
                raise ValueError(f"logit_bias key {k!r} is not a token id") from None
            if not 0 <= tok < self.n_vocab():
                raise ValueError(f"logit_bias token {tok} is outside the vocabulary [0, {self.n_vocab()})")
            bias[tok] = bias.get(tok, 0.0) + float(v)
        return Sampling(temperature=max(0.0, temperature), top_k=max(0, top_k), top_p=top_p, min_p=min_p,
                        repeat_penalty=repeat_penalty, repeat_last_n=self.last_n_tokens_size,
                        frequency_penalty=frequency_penalty, presence_penalty=presence_penalty,
                        seed=self._rng.getrandbits(64) if seed is None or seed < 0 else seed, stop=stops,
                        grammar=None if grammar is None else gbnf_of(grammar),
                        typical_p=typical_p, mirostat=mirostat_mode, mirostat_tau=mirostat_tau,
                        mirostat_eta=mirostat_eta, logit_bias=bias)

    def _prompt_tokens(self, prompt: Union[str, List[int]]) -> List[int]:
        if isinstance(prompt, str):
            if prompt == "":
                bos = self.token_bos()
                return [bos] if bos >= 0 else []
            return self.tokenize(prompt.encode("utf-8"), special=True)
        return [int(t) for t in prompt]

    @staticmethod
    def _max_tokens(max_tokens: Optional[int]) -> int:
        return UNTIL_END if max_tokens is None or max_tokens <= 0 else int(max_tokens)

    def _logprobs_entry(self, pieces: List[Piece], offset: int) -> Dict[str, Any]:
        toks, offs, lps, tops = [], [], [], []
        for p in pieces:
            if p.token < 0:
                continue
            t = self._model.detokenize([p.token]).decode("utf-8", "replace")
            toks.append(t)
            offs.append(offset)
            offset += len(t)
            lps.append(p.logprob)
            tops.append({self._model.detokenize([i]).decode("utf-8", "replace"): lp for i, lp in (p.top or [])})
        return {"tokens": toks, "text_offset": offs, "token_logprobs": lps, "top_logprobs": tops}

    def create_completion(
        self,
        prompt: Union[str, List[int]],
        suffix: Optional[str] = None,
        max_tokens: Optional[int] = 16,
        temperature: float = 0.8,
        top_p: float = 0.95,
        min_p: float = 0.05,
        typical_p: float = 1.0,
        logprobs: Optional[int] = None,
        echo: bool = False,
        stop: Optional[Union[str, List[str]]] = [],
        frequency_penalty: float = 0.0,
        presence_penalty: float = 0.0,
        repeat_penalty: float = 1.0,
        top_k: int = 40,
        stream: bool = False,
        seed: Optional[int] = None,
        tfs_z: float = 1.0,
        mirostat_mode: int = 0,
        mirostat_tau: float = 5.0,
        mirostat_eta: float = 0.1,
        model: Optional[str] = None,
        stopping_criteria: Any = None,
        logits_processor: Any = None,
        grammar: Any = None,
        logit_bias: Optional[Dict[int, float]] = None,
    ) -> Union[Dict[str, Any], Iterator[Dict[str, Any]]]:
        """Generates text from a prompt: an OpenAI ``text_completion`` dict,
        or with stream=True an iterator of its chunks."""
        self._check_sampling(typical_p, tfs_z, mirostat_mode, logits_processor, grammar, logit_bias,
                             stopping_criteria, suffix)
        if logprobs is not None and logprobs < 0:
            raise ValueError(f"logprobs {logprobs} is negative")
        smp = self._sampling(temperature, top_p, top_k, min_p, repeat_penalty, frequency_penalty,
                             presence_penalty, seed, stop, grammar, typical_p, mirostat_mode, mirostat_tau,
                             mirostat_eta, logit_bias)
        ids = self._prompt_tokens(prompt)
        n = self._max_tokens(max_tokens)
        self._drop_eval_context()
        head = {"id": f"cmpl-{uuid.uuid4()}", "object": "text_completion", "created": int(time.time()),
                "model": model if model is not None else self.model_path}
        prompt_text = prompt if isinstance(prompt, str) else self.detokenize(ids).decode("utf-8", "replace")
        if stream:
            return self._stream_completion(head, ids, n, smp, logprobs, echo, prompt_text)
        pieces: List[Piece] = []
        with self._model.session() as s:
            r = run(s, ids, n, smp, lambda p: pieces.append(p), logprobs)
        text = b"".join(p.text for p in pieces).decode("utf-8", "replace")
        lp = self._logprobs_entry(pieces, len(prompt_text) if echo else 0) if logprobs is not None else None
        self.last_stats = r.stats
        return dict(head, choices=[{"text": (prompt_text if echo else "") + text, "index": 0, "logprobs": lp,
                                    "finish_reason": _finish(r.stats.finish_reason)}],
                    usage=_usage(r.stats))

    def _stream_completion(self, head: Dict[str, Any], ids: List[int], n: int, smp: Sampling,
                           logprobs: Optional[int], echo: bool, prompt_text: str) -> Iterator[Dict[str, Any]]:
        offset = 0
        if echo:
            yield dict(head, choices=[{"text": prompt_text, "index": 0, "logprobs": None, "finish_reason": None}])
            offset = len(prompt_text)
        with self._model.session() as s:
            for item in iterate(s, ids, n, smp, logprobs):
                if isinstance(item, Piece):
                    text = item.text.decode("utf-8", "replace")
                    lp = self._logprobs_entry([item], offset) if logprobs is not None and item.token >= 0 else None
                    offset += len(text)
                    if text or lp:
                        yield dict(head, choices=[{"text": text, "index": 0, "logprobs": lp, "finish_reason": None}])
                else:
                    self.last_stats = item.stats
                    yield dict(head, choices=[{"text": "", "index": 0, "logprobs": None,
                                               "finish_reason": _finish(item.stats.finish_reason)}])

    def __call__(self, prompt: Union[str, List[int]], *args: Any, **kwargs: Any):
        """create_completion."""
        return self.create_completion(prompt, *args, **kwargs)

    def create_chat_completion(
        self,
        messages: List[Dict[str, Any]],
        functions: Optional[List[Any]] = None,
        function_call: Any = None,
        tools: Optional[List[Any]] = None,
        tool_choice: Any = None,
        temperature: float = 0.2,
        top_p: float = 0.95,
        top_k: int = 40,
        min_p: float = 0.05,
        typical_p: float = 1.0,
        stream: bool = False,
        stop: Optional[Union[str, List[str]]] = [],
        seed: Optional[int] = None,
        response_format: Optional[Dict[str, Any]] = None,
        max_tokens: Optional[int] = None,
        presence_penalty: float = 0.0,
        frequency_penalty: float = 0.0,
        repeat_penalty: float = 1.0,
        tfs_z: float = 1.0,
        mirostat_mode: int = 0,
        mirostat_tau: float = 5.0,
        mirostat_eta: float = 0.1,
        model: Optional[str] = None,
        logits_processor: Any = None,
        grammar: Any = None,
        logit_bias: Optional[Dict[int, float]] = None,
        logprobs: Optional[bool] = None,
        top_logprobs: Optional[int] = None,
    ) -> Union[Dict[str, Any], Iterator[Dict[str, Any]]]:
        """A chat completion from OpenAI-shaped messages, formatted with the
        model's chat template (or chat_format's): a ``chat.completion`` dict,
        or with stream=True an iterator of ``chat.completion.chunk`` dicts."""
        for name, v in (("functions", functions), ("function_call", function_call), ("tools", tools),
                        ("tool_choice", tool_choice)):
            if v is not None:
                _refuse(name, v, "hetero's chat completions have no tool or function calling")
        if response_format is not None:
            if grammar is not None and response_format.get("type", "text") != "text":
                raise ValueError("give grammar or a JSON response_format, not both")
            gbnf = response_format_gbnf(response_format)
            grammar = grammar if gbnf is None else gbnf
        self._check_sampling(typical_p, tfs_z, mirostat_mode, logits_processor, grammar, logit_bias)
        if top_logprobs is not None and not logprobs:
            raise ValueError("top_logprobs needs logprobs=True")
        prompt = chat.apply(self._chat_template, messages, add_assistant=True)
        self._drop_eval_context()
        ids = self._model.tokenize(prompt, add_special=True, parse_special=True)
        smp = self._sampling(temperature, top_p, top_k, min_p, repeat_penalty, frequency_penalty,
                             presence_penalty, seed, stop, grammar, typical_p, mirostat_mode, mirostat_tau,
                             mirostat_eta, logit_bias)
        n = self._max_tokens(max_tokens)
        k = (top_logprobs or 0) if logprobs else None
        head = {"id": f"chatcmpl-{uuid.uuid4()}", "created": int(time.time()),
                "model": model if model is not None else self.model_path}
        if stream:
            return self._stream_chat(head, ids, n, smp, k)
        pieces: List[Piece] = []
        with self._model.session() as s:
            r = run(s, ids, n, smp, lambda p: pieces.append(p), k)
        self.last_stats = r.stats
        text = b"".join(p.text for p in pieces).decode("utf-8", "replace")
        return dict(head, object="chat.completion",
                    choices=[{"index": 0, "message": {"role": "assistant", "content": text},
                              "logprobs": self._chat_logprobs(pieces) if k is not None else None,
                              "finish_reason": _finish(r.stats.finish_reason)}],
                    usage=_usage(r.stats))

    def _chat_logprobs(self, pieces: List[Piece]) -> Dict[str, Any]:
        content = []
        for p in pieces:
            if p.token < 0:
                continue
            t = self._model.detokenize([p.token])
            content.append({"token": t.decode("utf-8", "replace"), "logprob": p.logprob, "bytes": list(t),
                            "top_logprobs": [{"token": (b := self._model.detokenize([i])).decode("utf-8", "replace"),
                                              "logprob": lp, "bytes": list(b)} for i, lp in (p.top or [])]})
        return {"content": content}

    def _stream_chat(self, head: Dict[str, Any], ids: List[int], n: int, smp: Sampling,
                     k: Optional[int]) -> Iterator[Dict[str, Any]]:
        chunk = dict(head, object="chat.completion.chunk")
        yield dict(chunk, choices=[{"index": 0, "delta": {"role": "assistant"}, "logprobs": None,
                                    "finish_reason": None}])
        with self._model.session() as s:
            for item in iterate(s, ids, n, smp, k):
                if isinstance(item, Piece):
                    text = item.text.decode("utf-8", "replace")
                    lp = self._chat_logprobs([item]) if k is not None and item.token >= 0 else None
                    if text or lp:
                        yield dict(chunk, choices=[{"index": 0, "delta": {"content": text}, "logprobs": lp,
                                                    "finish_reason": None}])
                else:
                    self.last_stats = item.stats
                    yield dict(chunk, choices=[{"index": 0, "delta": {}, "logprobs": None,
                                                "finish_reason": _finish(item.stats.finish_reason)}])

    # -- embeddings --------------------------------------------------------
    def embed(self, input: Union[str, List[str]], normalize: bool = False, truncate: bool = True,
              return_count: bool = False):
        """Embeddings: the last hidden state after the final norm, per token
        (pooling_type none, the default: a list of vectors per input) or
        pooled (mean, cls: the first token, last); normalize: unit length.
        truncate: inputs longer than n_batch are cut there, else refused."""
        if not self._embedding:
            raise RuntimeError("Llama model must be created with embedding=True to call this method")
        inputs = [input] if isinstance(input, str) else list(input)
        out, total, seqs = [], 0, []
        for text in inputs:
            ids = self.tokenize(text.encode("utf-8"))
            if len(ids) > self.n_batch:
                if not truncate:
                    raise ValueError(f"input of {len(ids)} tokens exceeds n_batch {self.n_batch}; truncate=True "
                                     "cuts it")
                ids = ids[: self.n_batch]
            total += len(ids)
            seqs.append(ids)
        if self._pooling == "none":
            for ids in seqs:
                h = self._model.hidden_states(ids).astype(np.float64)
                if normalize:
                    h = h / np.maximum(np.linalg.norm(h, axis=1, keepdims=True), 1e-12)
                out.append(h.tolist())
        else:
            # All inputs at once: hetero packs them into shared evaluations.
            for v in self._model.embed(seqs, self._pooling, 2 if normalize else -1):
                out.append(v.astype(np.float64).tolist())
        result = out[0] if isinstance(input, str) else out
        return (result, total) if return_count else result

    def create_embedding(self, input: Union[str, List[str]], model: Optional[str] = None) -> Dict[str, Any]:
        """OpenAI's embeddings response over embed()."""
        inputs = input if isinstance(input, list) else [input]
        embeds, total = self.embed(inputs, return_count=True)
        return {"object": "list", "model": model if model is not None else self.model_path,
                "data": [{"object": "embedding", "embedding": e, "index": i} for i, e in enumerate(embeds)],
                "usage": {"prompt_tokens": total, "total_tokens": total}}

    # -- lifetime ----------------------------------------------------------
    def close(self) -> None:
        """Frees the session, the model and the runtime now."""
        if getattr(self, "_session", None) is not None:
            self._session.close()
            self._session = None
        if getattr(self, "_model", None) is not None:
            self._model.close()
        if getattr(self, "runtime", None) is not None:
            self.runtime.close()

    def __enter__(self) -> "Llama":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        # The handles' own finalizers free them; nothing to do here, but
        # llama-cpp-python code may call it.
        pass


def _finish(reason: str) -> str:
    # hetero's "callback" is a stream its consumer stopped: OpenAI has no word.
    return reason if reason in ("stop", "length") else "stop"


def _usage(st: Any) -> Dict[str, int]:
    return {"prompt_tokens": st.prompt_tokens, "completion_tokens": st.generated_tokens,
            "total_tokens": st.prompt_tokens + st.generated_tokens}
