"""The package's own chat formats, registered through its entry points (group ``maigym_ray.chat_formats``):
ChatML (Qwen, the tiny models), Llama 3, Gemma, and Mistral's [INST] format (which has no system turn, so the
system text opens the first user turn's block)."""

from __future__ import annotations

from maigym_ray.harness.prompt import ChatFormat

CHATML = ChatFormat()
LLAMA3 = ChatFormat(
    system="<|start_header_id|>system<|end_header_id|>\n\n{text}<|eot_id|>",
    user="<|start_header_id|>user<|end_header_id|>\n\n{text}<|eot_id|>",
    assistant_open="<|start_header_id|>assistant<|end_header_id|>\n\n",
    image="<|image|>",
)
GEMMA = ChatFormat(
    system="<start_of_turn>user\n{text}<end_of_turn>\n",
    user="<start_of_turn>user\n{text}<end_of_turn>\n",
    assistant_open="<start_of_turn>model\n",
    image="<start_of_image>",
)
MISTRAL = ChatFormat(
    system="[INST] {text} [/INST]", user="[INST] {text} [/INST]", assistant_open="", image="[IMG]"
)
