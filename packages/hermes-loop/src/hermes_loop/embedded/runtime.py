"""One llama.cpp model, context and batch, driven through llama-cpp-python's low-level C API.

Nothing here is thread-safe or async: :class:`~hermes_loop.embedded.EmbeddedTokenBackend`
serialises every call and runs it in a worker thread.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence
from pathlib import Path

import llama_cpp
import numpy as np
import numpy.typing as npt
from hermes_protocols import BackendError, ConfigError

#: llama.cpp's CPU kernels take a different matmul path once a micro-batch holds 64 tokens or
#: more, which moves logits by up to ~0.6 nats. Micro-batches below that keep prompt evaluation,
#: one-token decoding and teacher-forced rescoring numerically identical.
BATCH_INVARIANT_UBATCH = 32

FloatArray = npt.NDArray[np.float32]


def default_threads() -> int:
    """Half the CPUs, between 1 and 4: llama.cpp's spinning threads collapse on busy cores."""
    return max(1, min(4, (os.cpu_count() or 2) // 2))


class EmbeddedContextOverflow(BackendError):
    """The prompt (plus what must be generated) does not fit in the model's context window."""


def _set_quiet(quiet: bool) -> None:
    # llama-cpp-python routes llama.cpp's log through this logger; Llama(verbose=False) does the
    # same. Only the level of that library logger is touched.
    from llama_cpp import _logger

    _logger.set_verbose(not quiet)


class LlamaRuntime:
    """A loaded GGUF model with one context (one sequence) and a reusable token batch.

    ``n_threads`` defaults to :func:`default_threads`. ``n_ubatch`` defaults to
    :data:`BATCH_INVARIANT_UBATCH` so that logits do not depend on how a sequence was split
    into batches. Call :meth:`close` (or use ``with``) to free the C memory.
    """

    def __init__(
        self,
        path: Path,
        *,
        n_ctx: int = 2048,
        n_threads: int | None = None,
        n_batch: int = 512,
        n_ubatch: int = BATCH_INVARIANT_UBATCH,
        quiet: bool = True,
    ) -> None:
        n_threads = default_threads() if n_threads is None else n_threads
        if n_ctx <= 0 or n_threads <= 0 or n_batch <= 0 or n_ubatch <= 0:
            raise ConfigError("n_ctx, n_threads, n_batch and n_ubatch must be positive")
        _set_quiet(quiet)
        llama_cpp.llama_backend_init()
        self.path = path
        model_params = llama_cpp.llama_model_default_params()
        model_params.n_gpu_layers = 0
        model = llama_cpp.llama_model_load_from_file(str(path).encode(), model_params)
        if not model:
            raise ConfigError(f"llama.cpp could not load {path}")
        self._model = model
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = n_ctx
        params.n_batch = n_batch
        params.n_ubatch = min(n_ubatch, n_batch)
        params.n_seq_max = 1
        params.n_threads = n_threads
        params.n_threads_batch = n_threads
        ctx = llama_cpp.llama_init_from_model(model, params)
        if not ctx:
            llama_cpp.llama_model_free(model)
            raise ConfigError(f"llama.cpp could not create a context of {n_ctx} tokens")
        self._ctx = ctx
        self._vocab = llama_cpp.llama_model_get_vocab(model)
        self._memory = llama_cpp.llama_get_memory(ctx)
        self.n_ctx = int(llama_cpp.llama_n_ctx(ctx))
        self.n_batch = n_batch
        self.n_vocab = int(llama_cpp.llama_vocab_n_tokens(self._vocab))
        self._batch = llama_cpp.llama_batch_init(n_batch, 0, 1)
        #: every id the GGUF declares as end-of-generation (EOS, EOT, ...), as llama.cpp reads it
        self.eog_ids: frozenset[int] = frozenset(
            token
            for token in range(self.n_vocab)
            if llama_cpp.llama_vocab_is_eog(self._vocab, token)
        )
        self._piece = ctypes.create_string_buffer(256)
        self._tokens: list[int] = []
        #: tokens evaluated since the model was loaded (a cheap progress counter)
        self.n_decoded = 0
        self._closed = False

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Free the batch, the context and the model (idempotent)."""
        if self._closed:
            return
        self._closed = True
        llama_cpp.llama_batch_free(self._batch)
        llama_cpp.llama_free(self._ctx)
        llama_cpp.llama_model_free(self._model)

    def __enter__(self) -> LlamaRuntime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- evaluation --------------------------------------------------------------------------

    @property
    def cached(self) -> tuple[int, ...]:
        """The ids whose keys/values are in the KV cache, at positions ``0..len - 1``."""
        return tuple(self._tokens)

    @property
    def n_cached(self) -> int:
        return len(self._tokens)

    def common_prefix(self, ids: Sequence[int]) -> int:
        """How many leading ``ids`` the KV cache already holds."""
        n = 0
        for cached, wanted in zip(self._tokens, ids, strict=False):
            if cached != wanted:
                break
            n += 1
        return n

    def truncate(self, keep: int) -> None:
        """Drop the KV cache from position ``keep`` on (``0`` clears it)."""
        if keep >= len(self._tokens):
            return
        if not llama_cpp.llama_memory_seq_rm(self._memory, 0, keep, -1):
            llama_cpp.llama_memory_clear(self._memory, True)
            del self._tokens[:]
            if keep:
                raise BackendError("llama.cpp could not truncate the KV cache")
        del self._tokens[keep:]

    def feed(self, ids: Sequence[int], *, all_logits: bool = False) -> FloatArray:
        """Evaluate ``ids`` after the cached ones and return logits.

        Returns the last token's logits (shape ``(n_vocab,)``), or with ``all_logits`` one row
        per token (shape ``(len(ids), n_vocab)``). The array is a copy only with ``all_logits``;
        otherwise it is a view valid until the next call.
        """
        if not ids:
            raise ValueError("nothing to evaluate")
        start = len(self._tokens)
        if start + len(ids) > self.n_ctx:
            raise EmbeddedContextOverflow(
                f"{start + len(ids)} tokens do not fit the {self.n_ctx}-token context; "
                "raise n_ctx or shorten the conversation"
            )
        rows: list[FloatArray] = []
        for offset in range(0, len(ids), self.n_batch):
            chunk = ids[offset : offset + self.n_batch]
            self._decode(chunk, start + offset, all_logits=all_logits)
            if all_logits:
                pointer = llama_cpp.llama_get_logits(self._ctx)
                block = np.ctypeslib.as_array(pointer, shape=(len(chunk) * self.n_vocab,))
                rows.append(block.reshape(len(chunk), self.n_vocab).copy())
        return np.concatenate(rows) if all_logits else self.last_logits()

    def feed_one(self, token: int) -> FloatArray:
        """Evaluate one token after the cached ones (the decode step); return a logits view."""
        position = len(self._tokens)
        if position >= self.n_ctx:
            raise EmbeddedContextOverflow(f"the {self.n_ctx}-token context is full")
        batch = self._batch
        batch.n_tokens = 1
        batch.token[0] = token
        batch.pos[0] = position
        batch.n_seq_id[0] = 1
        batch.seq_id[0][0] = 0
        batch.logits[0] = 1
        self._check(llama_cpp.llama_decode(self._ctx, batch))
        self._tokens.append(token)
        self.n_decoded += 1
        return self.last_logits()

    def last_logits(self) -> FloatArray:
        pointer = llama_cpp.llama_get_logits_ith(self._ctx, -1)
        return np.ctypeslib.as_array(pointer, shape=(self.n_vocab,))

    def _decode(self, ids: Sequence[int], start: int, *, all_logits: bool) -> None:
        batch = self._batch
        n = len(ids)
        batch.n_tokens = n
        for i, token in enumerate(ids):
            batch.token[i] = token
            batch.pos[i] = start + i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = 1 if all_logits or i == n - 1 else 0
        self._check(llama_cpp.llama_decode(self._ctx, batch))
        self._tokens.extend(ids)
        self.n_decoded += n

    def _check(self, status: int) -> None:
        if status != 0:
            # a failed decode may leave part of the batch in the cache: start from scratch
            llama_cpp.llama_memory_clear(self._memory, True)
            del self._tokens[:]
        if status == 1:
            raise EmbeddedContextOverflow("llama.cpp found no KV-cache slot for the batch")
        if status != 0:
            raise BackendError(f"llama_decode failed with status {status}")

    # -- vocabulary --------------------------------------------------------------------------

    def is_eog(self, token: int) -> bool:
        """Whether ``token`` ends generation (EOS, EOT, ...), as the GGUF declares."""
        return token in self.eog_ids

    def piece(self, token: int) -> bytes:
        """The bytes ``token`` stands for (special tokens rendered as their text)."""
        size = llama_cpp.llama_token_to_piece(
            self._vocab, token, self._piece, len(self._piece), 0, True
        )
        if size < 0:
            self._piece = ctypes.create_string_buffer(-size)
            size = llama_cpp.llama_token_to_piece(
                self._vocab, token, self._piece, len(self._piece), 0, True
            )
        return self._piece.raw[:size]

    def tokenize(self, text: str, *, special: bool = True) -> list[int]:
        """llama.cpp's own tokenizer (no BOS added); ``special`` parses ``<|im_end|>`` etc."""
        data = text.encode("utf-8")
        capacity = len(data) + 8
        buffer = (llama_cpp.llama_token * capacity)()
        n = llama_cpp.llama_tokenize(self._vocab, data, len(data), buffer, capacity, False, special)
        if n < 0:
            raise BackendError(f"llama_tokenize needs {-n} slots")
        return list(buffer[:n])

    def metadata(self, key: str) -> str | None:
        """A GGUF metadata value as a string (``None`` when absent)."""
        size = 1 << 16
        while True:
            buffer = ctypes.create_string_buffer(size)
            n = llama_cpp.llama_model_meta_val_str(self._model, key.encode(), buffer, size)
            if n < 0:
                return None
            if n < size:
                return buffer.raw[:n].decode("utf-8", errors="replace")
            size = n + 1
