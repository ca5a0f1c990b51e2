from __future__ import annotations

import json
from pathlib import Path

import pytest
from hermes_loop import ChatTemplateError, HFTokenizer, JinjaChatTemplate
from hermes_protocols import Message, ToolCall, ToolSchema
from hypothesis import given, settings
from hypothesis import strategies as st

TOOLS = (
    ToolSchema(
        name="add",
        description="Add two numbers",
        parameters={"type": "object", "properties": {"a": {"type": "integer"}}},
    ),
)

# A tool-aware ChatML template in the style of Qwen2.5 (written for this test).
TOOL_CHATML = """
{%- if tools %}
<|im_start|>system
{{ messages[0]['content'] if messages[0]['role'] == 'system' else 'Default.' }}
{%- for tool in tools %}
{{ tool | tojson }}
{%- endfor %}<|im_end|>
{% endif %}
{%- for message in messages %}
{%- if message.role == 'system' and tools %}{% continue %}{% endif %}
{%- if message.role == 'assistant' and message.tool_calls %}
<|im_start|>assistant
{% if message.content %}{{ message.content }}{% endif %}
{%- for tc in message.tool_calls %}
<tool_call>
{"name": "{{ tc.function.name }}", "arguments": {{ tc.function.arguments | tojson }}}
</tool_call>
{%- endfor %}<|im_end|>
{% else %}
<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}
"""


def test_chatml_render_matches_hf_semantics(chatml: str) -> None:
    template = JinjaChatTemplate(chatml)
    text = template.render([Message.user("hi")], add_generation_prompt=True)
    assert text == (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    )
    assert not template.supports_tools
    assert template.tool_fallback


def test_tool_aware_template_gets_tools_and_object_arguments() -> None:
    template = JinjaChatTemplate(TOOL_CHATML)
    assert template.supports_tools
    assert not template.tool_fallback
    msgs = [
        Message.system("Sys."),
        Message.user("1+2?"),
        Message.assistant(None, (ToolCall("c1", "add", '{"a": 1}'),)),
        Message.tool("3", "c1"),
    ]
    text = template.render(msgs, tools=TOOLS, add_generation_prompt=True)
    assert '"name": "add"' in text
    assert '{"name": "add", "arguments": {"a": 1}}' in text
    assert text.startswith('<|im_start|>system\nSys.{"type": "function"')
    assert text.endswith("<|im_start|>tool\n3<|im_end|>\n<|im_start|>assistant\n")


def test_hermes_fallback_puts_tools_in_system_prompt(chatml: str) -> None:
    template = JinjaChatTemplate(chatml)
    msgs = [
        Message.user("1+2?"),
        Message.assistant("Let me add.", (ToolCall("c1", "add", '{"a": 1}'),)),
        Message.tool("3", "c1"),
    ]
    text = template.render(msgs, tools=TOOLS)
    system = text.split("<|im_end|>")[0]
    assert "<tools>" in system
    assert "</tools>" in system
    assert "<tool_call>" in system
    spec = system.split("<tools> ")[1].split(" </tools>")[0]
    assert json.loads(spec)["function"]["name"] == "add"
    assert "You are a helpful assistant." not in text  # our system prompt replaced the default
    assert (
        '<|im_start|>assistant\nLet me add.\n<tool_call>\n{"name": "add", "arguments": {"a": 1}}'
        "\n</tool_call><|im_end|>" in text
    )
    assert "<|im_start|>tool\n<tool_response>\n3\n</tool_response><|im_end|>\n" in text


def test_fallback_merges_into_existing_system_and_custom_tool_role(chatml: str) -> None:
    template = JinjaChatTemplate(chatml, fallback_tool_role="user")
    text = template.render([Message.system("Be brief."), Message.tool("ok", "c1")], tools=TOOLS)
    assert text.startswith("<|im_start|>system\nBe brief.\n\nYou are a function calling")
    assert "<|im_start|>user\n<tool_response>\nok\n</tool_response>" in text


def test_raise_exception_and_bad_syntax_are_typed_errors() -> None:
    template = JinjaChatTemplate("{{ raise_exception('roles must alternate') }}")
    with pytest.raises(ChatTemplateError, match="roles must alternate"):
        template.render([Message.user("x")])
    with pytest.raises(ChatTemplateError, match="does not compile"):
        JinjaChatTemplate("{% for %}")


def test_bos_eos_and_extra_context() -> None:
    template = JinjaChatTemplate(
        "{{ bos_token }}{% if enable_thinking %}T{% endif %}{{ eos_token }}",
        bos_token="<s>",
        eos_token="</s>",
        extra_context={"enable_thinking": True},
    )
    assert template.render([]) == "<s>T</s>"


def test_hf_tokenizer_round_trip_and_template(tokenizer_dir: Path) -> None:
    tok = HFTokenizer.from_directory(tokenizer_dir)
    text = tok.chat_template.render([Message.user("hello world")], add_generation_prompt=True)
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    im_end = tok.encode("<|im_end|>")
    assert im_end == [tok.eos_token_id]
    assert ids.count(tok.eos_token_id) == 2


def test_hf_tokenizer_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="does not exist"):
        HFTokenizer.from_directory(tmp_path / "nope")


@settings(max_examples=60)
@given(text=st.text(max_size=60) | st.sampled_from(["<|im_start|>user\nhi<|im_end|>\n", " . ,"]))
def test_fast_path_matches_transformers(hf_tokenizer: HFTokenizer, text: str) -> None:
    tok = hf_tokenizer
    slow = tok._tok  # the transformers tokenizer behind it
    assert tok.encode(text) == slow.encode(text, add_special_tokens=False)
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert tok.decode(ids) == slow.decode(ids, skip_special_tokens=False)
