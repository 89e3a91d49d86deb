"""hetero from Python.

Two layers over ``libhetero`` (hetero.h):

* a thin one: :class:`Runtime`, :class:`Model`, :class:`Session` (logits
  as numpy views of hetero's memory), :class:`Sampling`, :class:`Engine` /
  :class:`AsyncEngine` (the serving engine, from threads or asyncio), chat
  templates (:mod:`hetero.chat`), errors (:mod:`hetero.errors`);
* :class:`Llama`, llama-cpp-python's class: ``from hetero import Llama``.
"""
from . import chat, errors
from .engine import AsyncEngine, Engine, Request
from .errors import HeteroError
from .grammar import LlamaGrammar
from .llama import Llama
from .model import UNTIL_END, Model, Session, architectures, synthetic_path, write_synthetic
from .runtime import Runtime
from .sampling import Sampling

__all__ = ["AsyncEngine", "Engine", "HeteroError", "Llama", "LlamaGrammar", "Model", "Request", "Runtime", "Sampling", "Session",
           "UNTIL_END", "architectures", "chat", "errors", "synthetic_path", "write_synthetic"]
