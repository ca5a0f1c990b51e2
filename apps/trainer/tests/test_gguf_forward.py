"""The JAX forward pass on the default SmolLM2 GGUF (the shipped Q4_1 converted to Q8_0)
against llama.cpp running the same file, with and without a LoRA adapter the trainer wrote
and llama.cpp hot-loaded (the JAX side reads it back from the file, as ``--init-adapter``
does).

The two differ by llama.cpp's quantized arithmetic (8-bit activations against the Q8_0
weights, a q8_0 KV cache): about 0.1 nats per token on this text. A wrong RoPE layout, head
grouping or adapter layout gives several nats.
"""

from __future__ import annotations

import functools
from pathlib import Path

import anyio
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hermes_loop.embedded import EmbeddedTokenBackend, GGUFTokenizer, default_model_path
from hermes_trainer.gguf_weights import read_base_weights
from hermes_trainer.learner import LoraLearner
from hermes_trainer.llama import token_logprobs
from hermes_trainer.lora import LoraSpec, initial_lora, read_gguf_adapter, write_gguf_adapter
from hermes_trainer.optimizer import OptimizerSpec

TEXT = (
    "<|im_start|>user\nWrite the word apple to answer.txt.<|im_end|>\n<|im_start|>assistant\n"
    '<tool_call>\n{"name": "terminal", "arguments": {"command": "echo apple > answer.txt"}}\n'
    "</tool_call><|im_end|>"
)


@pytest.mark.slow
@pytest.mark.heavy
def test_the_jax_forward_pass_matches_llama_cpp_with_and_without_an_adapter(
    tmp_path: Path,
) -> None:
    path = default_model_path()
    base = read_base_weights(path)
    assert base.config.n_layers == 30
    assert base.config.n_kv_heads == 3
    ids = GGUFTokenizer.from_gguf(path).encode(TEXT)
    spec = LoraSpec(rank=4, alpha=8.0)
    rng = np.random.default_rng(0)
    lora = {
        kind: (a, rng.normal(0, 0.08, b.shape).astype(np.float32))
        for kind, (a, b) in initial_lora(base, spec, seed=0).items()
    }
    adapter = write_gguf_adapter(tmp_path / "adapter.gguf", lora, spec.alpha)

    async def llama_cpp() -> tuple[np.ndarray, np.ndarray]:
        async with await EmbeddedTokenBackend.open(n_ctx=256, n_threads=1) as backend:
            plain = await backend.score(ids)
            await backend.load_lora(adapter)
            return np.array(plain), np.array(await backend.score(ids))

    cpp_base, cpp_adapted = anyio.run(llama_cpp)
    read_back = read_gguf_adapter(adapter)  # what --init-adapter starts the learner from
    assert (read_back.rank, read_back.alpha) == (spec.rank, spec.alpha)
    learner = LoraLearner(base, spec, OptimizerSpec(), start=read_back.lora)
    params = learner.params
    forward = jax.jit(functools.partial(token_logprobs, base.config, spec.scale))
    n = len(ids) - 1
    args = (jnp.asarray(ids[:-1]), jnp.asarray(ids[1:]), jnp.arange(n), jnp.zeros(n, jnp.int32))
    ours_base = np.asarray(forward(params, {}, *args))
    jax_lora = {k: (jnp.asarray(a), jnp.asarray(b)) for k, (a, b) in learner.lora_arrays().items()}
    ours_adapted = np.asarray(forward(params, jax_lora, *args))

    assert np.abs(cpp_adapted - cpp_base).mean() > 0.3  # the adapter moves llama.cpp a lot
    for ours, theirs in ((ours_base, cpp_base), (ours_adapted, cpp_adapted)):
        gap = np.abs(ours - theirs)
        assert gap.mean() < 0.15, gap.mean()
        assert gap.max() < 1.0, gap.max()
