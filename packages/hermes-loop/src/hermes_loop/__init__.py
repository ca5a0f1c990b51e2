"""hermes-loop: the async agent loop, inference backends and the token ledger.

The embedded llama.cpp backend lives in ``hermes_loop.embedded`` and is imported explicitly
(it needs the ``embedded`` extra).
"""

from hermes_loop.chat_template import (
    ChatTemplateError,
    JinjaChatTemplate,
    hermes_tool_call_text,
    hermes_tools_system_prompt,
)
from hermes_loop.config import (
    GenerationFinished,
    LoopEvent,
    LoopLimits,
    Observer,
    RolloutFinished,
    ToolCallFinished,
    TurnStarted,
)
from hermes_loop.factory import (
    SERVER_TYPES,
    ModelHandle,
    ModelSpec,
    ServerType,
    check_spec,
    open_model,
    probe_server,
)
from hermes_loop.hf_tokenizer import HFTokenizer
from hermes_loop.http_client import HTTPBackend, JSONPoster, RetryPolicy
from hermes_loop.ledger import (
    TemplateBridge,
    TokenLedger,
    compare_ids,
    default_end_token_ids,
    template_end_token,
)
from hermes_loop.llama_server_backend import LlamaServerBackend
from hermes_loop.loop import AgentLoop, GenerationTimeout, run
from hermes_loop.models import CallIds, ChatModel, TokenModel, TurnOutput
from hermes_loop.openai_chat import OpenAIChatBackend, parse_chat_response
from hermes_loop.sglang_backend import SGLangBackend
from hermes_loop.tool_calls import PendingCall, SchemaCache, ToolHandler, validate_call
from hermes_loop.vllm_backend import VLLMBackend

__all__ = [
    "SERVER_TYPES",
    "AgentLoop",
    "CallIds",
    "ChatModel",
    "ChatTemplateError",
    "GenerationFinished",
    "GenerationTimeout",
    "HFTokenizer",
    "HTTPBackend",
    "JSONPoster",
    "JinjaChatTemplate",
    "LlamaServerBackend",
    "LoopEvent",
    "LoopLimits",
    "ModelHandle",
    "ModelSpec",
    "Observer",
    "OpenAIChatBackend",
    "PendingCall",
    "RetryPolicy",
    "RolloutFinished",
    "SGLangBackend",
    "SchemaCache",
    "ServerType",
    "TemplateBridge",
    "TokenLedger",
    "TokenModel",
    "ToolCallFinished",
    "ToolHandler",
    "TurnOutput",
    "TurnStarted",
    "VLLMBackend",
    "check_spec",
    "compare_ids",
    "default_end_token_ids",
    "hermes_tool_call_text",
    "hermes_tools_system_prompt",
    "open_model",
    "parse_chat_response",
    "probe_server",
    "run",
    "template_end_token",
    "validate_call",
]
