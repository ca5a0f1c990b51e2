"""Which engine computed a rollout's logprobs, and what reproduces them (``sampling.engine``).

A teacher-forced recompute gives the recorded logprob only on an engine whose arithmetic
matches the sampler's (see docs/loop.md, "Batch invariance"). Every record says which engine
sampled it and what reproduces it: the embedded model's own settings (a ``q8_0`` K/V cache,
flash attention, 32-token micro-batches, one KV stream per sequence) and llama.cpp build, which
a llama-server built from the same llama.cpp approaches with :data:`EXACT_LLAMA_SERVER_FLAGS`
(to about 1e-4 nats; its defaults do not: 0.06 nats measured at agent prompt lengths, up to 1.2
reported); for a server, the flags or mode it must run with, since no server reports them.
"""

from __future__ import annotations

from hermes_protocols import JSONObject


def llama_server_flags(n_ubatch: int = 32) -> tuple[str, ...]:
    """The llama-server flags of the embedded sampler's numerics (one slot, ``n_ubatch``-token
    micro-batches, flash attention, a ``q8_0`` K/V cache)."""
    return ("-np", "1", "-ub", str(n_ubatch), "-fa", "on", "-ctk", "q8_0", "-ctv", "q8_0")


#: llama-server flags whose teacher-forced recompute equals its own generations and comes
#: within about 1e-4 nats of the embedded sampler's, at agent prompt lengths (1,558-token
#: prompts; docs/loop.md)
EXACT_LLAMA_SERVER_FLAGS = llama_server_flags()

_SERVERS = {
    "llama_cpp": (
        "llama-server",
        f"this server only if it runs {' '.join(EXACT_LLAMA_SERVER_FLAGS)} (it does not "
        "report its flags); its defaults (f16 cache) differ by 0.06 to over 1 nat",
    ),
    "vllm": ("vllm", "a batch-invariant vLLM only (VLLM_BATCH_INVARIANT=1)"),
    "sglang": ("sglang", "a deterministic SGLang only (--enable-deterministic-inference)"),
}


def embedded_engine(n_ubatch: int, llama_cpp_version: str) -> JSONObject:
    """The embedded llama.cpp sampler's numerics and what reproduces them. The llama.cpp build
    is part of them: the workspace's (``+hermes.N``, third_party/llama-cpp-python) runs its own
    attention loop, which a stock llama-server does not reproduce to 1e-3 (docs/embedded.md)."""
    return {
        "name": "embedded",
        "llama_cpp_python": llama_cpp_version,
        "kv_cache_type": "q8_0",
        "flash_attention": True,
        "n_ubatch": n_ubatch,
        "kv_unified": False,
        "reproduced_by": f"the embedded model itself on llama-cpp-python {llama_cpp_version} "
        "(EmbeddedTokenBackend.score), or llama-server built from the same llama.cpp "
        "(.ci/llama-server.sh) with " + " ".join(llama_server_flags(n_ubatch)) + " (to about "
        "1e-4 nats)",
    }


def server_engine(server_type: str) -> JSONObject:
    """A token server's name and what a recompute must run on to match it."""
    name, reproduced_by = _SERVERS[server_type]
    return {"name": name, "reproduced_by": reproduced_by}
