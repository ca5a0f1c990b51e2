"""One llama.cpp model and context with several KV-cache sequences, via the low-level C API.

Nothing here is thread-safe or async: :class:`~hermes_loop.embedded.EmbeddedTokenBackend`
drives it from one worker thread (its batch scheduler).

Numerics. Each sequence has its own KV-cache stream (``kv_unified = False``), so its cells
always hold positions ``0..len - 1`` in order; the context runs flash attention with a ``q8_0``
K/V cache and micro-batches below 64 tokens. With those settings llama.cpp's CPU attention is
the plain online-softmax loop over the query's own stream in position order, and every weight
matrix product is one dot product per output element, so a sequence's logits are bitwise those
of a fresh one-sequence recompute, whatever else shares the batch or the cache. (In a unified
cache, cells freed by one sequence are reused by another's next ids below its older cells:
attention then visits them out of position order and the logits move, by up to 0.4 nats on a
quantized model. An ``f16`` cache switches to a tiled kernel at 64 queries and to a
thread-split kernel for one query over 512+ cells, both of which move logits with the batch.)
"""

from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Sequence
from pathlib import Path

import llama_cpp
import numpy as np
import numpy.typing as npt
from hermes_protocols import BackendError, ConfigError

from hermes_loop.embedded.threads import ThreadTuner

#: micro-batch size: below 64 tokens, so flash attention never takes its tiled path
BATCH_INVARIANT_UBATCH = 32
#: ids in one ``llama_decode`` at most, in generation steps and scoring chunks alike: the thread
#: tuner decides often, and a probe that loses on a busy machine costs little (one 512-id
#: scoring chunk on two threads took 50 s there), while decoding sequences wait little for a
#: prompt chunk
STEP_IDS = 64

FloatArray = npt.NDArray[np.float32]


def physical_cores() -> int:
    """Physical cores this process may run on (SMT siblings counted once; 1 at least)."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)
    cores: set[str] = set()
    for cpu in cpus:
        topology = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            package = (topology / "physical_package_id").read_text().strip()
            core = (topology / "core_id").read_text().strip()
        except OSError:
            return max(1, len(cpus))
        cores.add(f"{package}:{core}")
    return max(1, len(cores))


def default_threads() -> int:
    """llama.cpp threads: the physical cores (hyper-threads only contend for the same units)."""
    return physical_cores()


class EmbeddedContextOverflow(BackendError):
    """The prompt (plus what must be generated) does not fit in the model's context window."""


class KVCacheFull(BackendError):
    """llama.cpp found no free KV-cache cells for a batch."""


def _set_quiet(quiet: bool) -> None:
    # llama-cpp-python routes llama.cpp's log through this logger; Llama(verbose=False) does the
    # same. Only the level of that library logger is touched.
    from llama_cpp import _logger

    _logger.set_verbose(not quiet)


#: one entry of a batch: (sequence, ids to evaluate after its cached ones, logits of the last?)
BatchEntry = tuple[int, Sequence[int], bool]


class LlamaRuntime:
    """A loaded GGUF model with one context holding ``n_seq`` KV-cache sequences.

    ``n_ctx`` is the context of *one* sequence: each sequence has a KV stream of ``n_ctx``
    cells, so memory follows the context budget times the concurrency. Each sequence keeps the
    ids it holds (:meth:`cached`); :meth:`decode` evaluates new ids of several sequences in one
    ``llama_decode`` call. The ``seq=0`` defaults keep single-sequence callers short. Without
    ``n_threads``, a :class:`~hermes_loop.embedded.threads.ThreadTuner` picks the thread count
    of every ``llama_decode``, generation steps and scoring chunks alike. Call :meth:`close`
    (or use ``with``) to free the C memory.
    """

    def __init__(
        self,
        path: Path,
        *,
        n_ctx: int = 2048,
        n_seq: int = 1,
        n_threads: int | None = None,
        n_batch: int = 512,
        n_ubatch: int = BATCH_INVARIANT_UBATCH,
        quiet: bool = True,
    ) -> None:
        tuned = n_threads is None
        n_threads = default_threads() if n_threads is None else n_threads
        if min(n_ctx, n_seq, n_threads, n_batch, n_ubatch) <= 0:
            raise ConfigError("n_ctx, n_seq, n_threads, n_batch and n_ubatch must be positive")
        if n_ubatch >= 64:
            raise ConfigError("n_ubatch must stay below 64 (llama.cpp's tiled attention path)")
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
        params.n_ctx = n_ctx * n_seq
        params.n_batch = n_batch
        params.n_ubatch = min(n_ubatch, n_batch)
        params.n_seq_max = n_seq
        params.kv_unified = False  # one KV stream per sequence: its cells in position order
        params.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED
        params.type_k = llama_cpp.GGML_TYPE_Q8_0
        params.type_v = llama_cpp.GGML_TYPE_Q8_0
        params.n_threads = n_threads
        params.n_threads_batch = n_threads
        ctx = llama_cpp.llama_init_from_model(model, params)
        if not ctx:
            llama_cpp.llama_model_free(model)
            raise ConfigError(f"llama.cpp could not create a context of {n_ctx} x {n_seq} tokens")
        self._ctx = ctx
        self._vocab = llama_cpp.llama_model_get_vocab(model)
        self._memory = llama_cpp.llama_get_memory(ctx)
        self.n_ctx = n_ctx
        self.n_seq = n_seq
        self.n_threads = n_threads
        self.threads_in_use = n_threads
        #: picks the thread count of every ``llama_decode`` (``None``: the caller fixed it)
        self.tuner = ThreadTuner(n_threads) if tuned else None
        self.n_batch = n_batch
        #: ids in one ``llama_decode`` at most, generation steps and scoring chunks alike
        self.step_ids = min(n_batch, STEP_IDS)
        self.n_ubatch = int(params.n_ubatch)
        self.n_vocab = int(llama_cpp.llama_vocab_n_tokens(self._vocab))
        self._batch = llama_cpp.llama_batch_init(n_batch, 0, 1)
        #: every id the GGUF declares as end-of-generation (EOS, EOT, ...), as llama.cpp reads it
        self.eog_ids: frozenset[int] = frozenset(
            token
            for token in range(self.n_vocab)
            if llama_cpp.llama_vocab_is_eog(self._vocab, token)
        )
        self._piece = ctypes.create_string_buffer(256)
        self._tokens: list[list[int]] = [[] for _ in range(n_seq)]
        #: tokens evaluated since the model was loaded (a cheap progress counter)
        self.n_decoded = 0
        #: ``llama_decode`` calls since the model was loaded
        self.n_calls = 0
        self._lora: llama_cpp.llama_adapter_lora_p | None = None
        #: the GGUF LoRA adapter applied to every decode (``None``: the base weights)
        self.lora_path: Path | None = None
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

    def set_threads(self, n_threads: int) -> None:
        """Threads for the next decodes (the logits do not depend on it)."""
        if n_threads != self.threads_in_use:
            llama_cpp.llama_set_n_threads(self._ctx, n_threads, n_threads)
            self.threads_in_use = n_threads

    # -- weights -----------------------------------------------------------------------------

    def set_lora(self, path: Path | None, scale: float = 1.0) -> None:
        """Apply the GGUF LoRA adapter at ``path`` (``None``: back to the base weights) and
        empty every sequence: cached keys/values were computed with the old weights.

        The previous adapter is freed. ``scale`` multiplies the adapter's ``alpha / rank``.
        """
        new = None
        if path is not None:
            new = llama_cpp.llama_adapter_lora_init(self._model, str(path).encode())
            if not new:
                raise ConfigError(f"llama.cpp could not load the LoRA adapter {path}")
            adapters = (llama_cpp.llama_adapter_lora_p_ctypes * 1)(new)
            scales = (ctypes.c_float * 1)(scale)
            status = llama_cpp.llama_set_adapters_lora(self._ctx, adapters, 1, scales)
        else:
            status = llama_cpp.llama_set_adapters_lora(self._ctx, None, 0, None)
        if status != 0:
            if new is not None:
                llama_cpp.llama_adapter_lora_free(new)
            raise BackendError(f"llama.cpp could not set the LoRA adapter (status {status})")
        if self._lora is not None:
            llama_cpp.llama_adapter_lora_free(self._lora)
        self._lora, self.lora_path = new, path
        self.clear()

    # -- sequences ---------------------------------------------------------------------------

    def cached_ids(self, seq: int = 0) -> tuple[int, ...]:
        """The ids whose keys/values sequence ``seq`` holds, at positions ``0..len - 1``."""
        return tuple(self._tokens[seq])

    @property
    def cached(self) -> tuple[int, ...]:
        return self.cached_ids(0)

    @property
    def n_cached(self) -> int:
        return len(self._tokens[0])

    def seq_len(self, seq: int) -> int:
        return len(self._tokens[seq])

    def common_prefix(self, ids: Sequence[int], seq: int = 0) -> int:
        """How many leading ``ids`` sequence ``seq`` already holds."""
        n = 0
        for cached, wanted in zip(self._tokens[seq], ids, strict=False):
            if cached != wanted:
                break
            n += 1
        return n

    def truncate(self, keep: int, seq: int = 0) -> None:
        """Drop sequence ``seq`` from position ``keep`` on (``0`` empties it)."""
        tokens = self._tokens[seq]
        if keep >= len(tokens):
            return
        if not llama_cpp.llama_memory_seq_rm(self._memory, seq, keep, -1):
            raise BackendError("llama.cpp could not truncate a KV-cache sequence")
        del tokens[keep:]

    def share(self, src: int, dst: int, n: int) -> None:
        """Make ``dst`` hold the first ``n`` ids of ``src`` by copying their cells (no compute)."""
        self.truncate(0, dst)
        if n:
            # across streams llama.cpp copies the whole stream (before the next decode), then
            # the copy is cut back to n ids
            llama_cpp.llama_memory_seq_cp(self._memory, src, dst, -1, -1)
            self._tokens[dst].extend(self._tokens[src])
            self.truncate(n, dst)

    def clear(self) -> None:
        """Empty every sequence."""
        llama_cpp.llama_memory_clear(self._memory, True)
        for tokens in self._tokens:
            tokens.clear()

    # -- evaluation --------------------------------------------------------------------------

    def decode(self, entries: Sequence[BatchEntry]) -> list[int]:
        """Evaluate every entry's ids after its sequence's cached ones, in one ``llama_decode``.

        Returns, per entry, the batch row of its last token's logits (``-1`` when not asked);
        read them with :meth:`logits` before the next call. At most :attr:`n_batch` ids.
        """
        batch = self._batch
        rows: list[int] = []
        n = 0
        for seq, ids, want in entries:
            start = len(self._tokens[seq])
            if start + len(ids) > self.n_ctx:
                raise EmbeddedContextOverflow(
                    f"{start + len(ids)} tokens do not fit the {self.n_ctx}-token context; "
                    "raise n_ctx or shorten the conversation"
                )
            if n + len(ids) > self.n_batch:
                raise ValueError(f"a batch holds at most {self.n_batch} ids")
            for i, token in enumerate(ids):
                batch.token[n] = token
                batch.pos[n] = start + i
                batch.n_seq_id[n] = 1
                batch.seq_id[n][0] = seq
                batch.logits[n] = 0
                n += 1
            if want and ids:
                batch.logits[n - 1] = 1
            rows.append(n - 1 if want and ids else -1)
        if n == 0:
            raise ValueError("nothing to evaluate")
        status = self._llama_decode(n)
        if status != 0:
            self._undo(entries)
            if status == 1:
                raise KVCacheFull("llama.cpp found no KV-cache slot for the batch")
            raise BackendError(f"llama_decode failed with status {status}")
        for seq, ids, _ in entries:
            self._tokens[seq].extend(ids)
        self.n_decoded += n
        return rows

    def _llama_decode(self, n: int) -> int:
        """``llama_decode`` of the batch's first ``n`` ids, with the tuner's thread count."""
        self._batch.n_tokens = n
        self.n_calls += 1
        if self.tuner is None:
            return int(llama_cpp.llama_decode(self._ctx, self._batch))
        threads = self.tuner.choose(n)
        self.set_threads(threads)
        began = time.perf_counter()
        status = int(llama_cpp.llama_decode(self._ctx, self._batch))
        if status == 0:
            self.tuner.record(threads, time.perf_counter() - began, n)
        return status

    def _undo(self, entries: Sequence[BatchEntry]) -> None:
        # a failed decode may leave part of the batch in the cache: drop what was not recorded
        for seq, _, _ in entries:
            llama_cpp.llama_memory_seq_rm(self._memory, seq, len(self._tokens[seq]), -1)

    def logits(self, row: int) -> FloatArray:
        """Logits of batch row ``row`` of the last :meth:`decode` (a view, valid until then)."""
        pointer = llama_cpp.llama_get_logits_ith(self._ctx, row)
        if not pointer:
            raise BackendError(f"llama.cpp has no logits for batch row {row}")
        return np.ctypeslib.as_array(pointer, shape=(self.n_vocab,))

    def feed(self, ids: Sequence[int], *, rows_from: int | None = None, seq: int = 0) -> FloatArray:
        """Evaluate ``ids`` after sequence ``seq``'s cached ones, one sequence per batch.

        Returns the last id's logits (a view valid until the next call), or with ``rows_from``
        a copy with one row per id from ``ids[rows_from]`` on (shape
        ``(len(ids) - rows_from, n_vocab)``); llama.cpp computes no row before it.
        """
        if not ids:
            raise ValueError("nothing to evaluate")
        if rows_from is not None and not 0 <= rows_from < len(ids):
            raise ValueError(f"rows_from must be in [0, {len(ids)}), got {rows_from}")
        if len(self._tokens[seq]) + len(ids) > self.n_ctx:
            raise EmbeddedContextOverflow(
                f"{len(self._tokens[seq]) + len(ids)} tokens do not fit the "
                f"{self.n_ctx}-token context; raise n_ctx or shorten the conversation"
            )
        out: list[FloatArray] = []
        row = -1
        for offset in range(0, len(ids), self.step_ids):
            chunk = ids[offset : offset + self.step_ids]
            if rows_from is None:
                (row,) = self.decode([(seq, chunk, True)])
            else:
                out.extend(self._feed_rows(chunk, seq, max(rows_from - offset, 0)))
        return np.stack(out) if rows_from is not None else self.logits(row)

    def _feed_rows(self, chunk: Sequence[int], seq: int, first: int) -> list[FloatArray]:
        """Evaluate ``chunk``; copies of the logits of ``chunk[first:]`` (none if past it)."""
        start = len(self._tokens[seq])
        batch = self._batch
        for i, token in enumerate(chunk):
            batch.token[i] = token
            batch.pos[i] = start + i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = seq
            batch.logits[i] = int(i >= first)
        status = self._llama_decode(len(chunk))
        if status != 0:
            self._undo([(seq, chunk, True)])
            raise BackendError(f"llama_decode failed with status {status}")
        self._tokens[seq].extend(chunk)
        self.n_decoded += len(chunk)
        return [self.logits(i).copy() for i in range(first, len(chunk))]

    def feed_one(self, token: int, seq: int = 0) -> FloatArray:
        """Evaluate one token after sequence ``seq``'s cached ones; return a logits view."""
        (row,) = self.decode([(seq, (token,), True)])
        return self.logits(row)

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
