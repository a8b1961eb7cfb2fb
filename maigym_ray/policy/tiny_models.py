"""Tiny default models built locally, so the whole project runs with no download.

Two real Hugging Face model directories (config, safetensors weights, tokenizer, and a processor for the VLM)
are written from code: a Qwen2 causal LM for text and an Idefics3 vision-language model. Weights are random
from a fixed seed, so the models say nothing useful, but every code path (tokenizer, chat template, vLLM
engine, prefix cache, weight sync, backward pass) is the real one. Building the same seed twice gives a
byte-identical ``model.safetensors``.

Choices, and why (measured with transformers 5.19 and vLLM CPU 0.32, see docs/platform-notes.md):

- head_dim 64 everywhere: vLLM's CPU attention backend rejects head_dim 16.
- Weights are float32. Serve with ``dtype="float32"``: vLLM's "auto" downcasts float32 to bfloat16 (it logs
  so), not the precision transformers uses. In float32, vLLM's greedy tokens matched transformers'.
- Idefics3 is the VLM because it needs no torchvision (Qwen2-VL, LLaVA, Pixtral import it in vLLM; PyPI's
  torchvision is CUDA-only); its processor uses the PIL image processor for the same reason. Image 448 with
  patch 28 gives 16x16 patches; scale_factor 2 folds them into 64 tokens. No image splitting: one image is
  always exactly 64 ``<image>`` tokens. Embeddings are untied in the VLM (Idefics3's default), tied in the LM.
- The tokenizer is a byte-level BPE trained on a fixed in-code corpus (English, JSON, the action grammar,
  accessibility text), with Qwen2's own pipeline, because ``AutoTokenizer`` always rebuilds a ``qwen2``
  tokenizer as ``Qwen2Tokenizer``; a generic byte-level BPE then split text differently once loaded.
  The vision special tokens come after the BPE ids, so shared tokens have the same ids in both models.
- vLLM accepted both configs unchanged with ``enforce_eager=True, block_size=32`` (CPU attention needs a
  multiple of 32; prefix caching hits whole blocks), ``dtype="float32"``, and for the VLM
  ``limit_mm_per_prompt={"image": 1}, skip_mm_profiling=True``, with prompt ids holding ONE unexpanded
  ``<image>`` plus ``multi_modal_data`` (vLLM expands it).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase
    from transformers.models.qwen2 import Qwen2Tokenizer

VERSION = "v2"
TEXT_SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Idefics3Processor looks up all of these, the row/col tags too (used only when image splitting is on).
_ROW_COL = [f"<row_{i}_col_{j}>" for i in range(1, 7) for j in range(1, 7)]
VISION_SPECIAL_TOKENS = [
    "<image>",
    "<fake_token_around_image>",
    "<global-img>",
    "<end_of_utterance>",
    *_ROW_COL,
]
BPE_VOCAB_SIZE = 3072  # the corpus supports about 2600 (digits stay single, as in Qwen2)
IMAGE_TOKENS_PER_IMAGE = 64  # (448 / 28) ** 2 patches / scale_factor ** 2
# Both models' text stacks share these sizes; head_dim 64 because vLLM's CPU attention rejects 16.
_BASE = {"hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 2}
_TEXT_DIMS = {**_BASE, "num_key_value_heads": 1, "head_dim": 64, "max_position_embeddings": 16384}
_VISION_DIMS = {**_BASE, "image_size": 448, "patch_size": 28}

# ChatML. A message's content is a string, or a list of {"type": "text"|"image"} parts (the processor's form).
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' }}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}{{ '<image>' }}{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}{{ '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

_SENTENCES = """\
The quick brown fox jumps over the lazy dog. Open the settings and turn on dark mode.
Find the invoice from November and tell me the total amount. Search for flights from Paris to Berlin.
Reply to the last email from Anna and say that the meeting is moved to Thursday at 3 pm.
Add two bottles of milk to the shopping cart, then go to checkout. Delete the draft named "Weekly report".
What is the weather in London tomorrow? Set an alarm for 7:30 in the morning. Turn off Wi-Fi.
The task is complete. I could not find the button, so I will scroll down and look again.
Thought: the search box is at the top of the page. Action: click the search box, then type the query.
Observation: the page shows a list of messages with sender, subject and date.
You are a helpful agent that operates a computer. Answer with exactly one action per turn.
Navigate back to the inbox. Open the app drawer and start the calculator. Press Enter to submit the form.
Name, Email, Password, Confirm password, Sign in, Sign up, Log out, Cancel, Save, Submit, Next, Previous.
Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March April May June July
August September October November December. Total: $1,234.56 (tax included). Order #A-20931 shipped.
0 1 2 3 4 5 6 7 8 9 10 11 12 42 64 89 100 128 256 500 512 999 1000 1024 2048 2024-11-03 12:45:07 3.14
! ? . , ; : ' " ( ) [ ] { } < > / \\ | - _ + = * & ^ % $ # @ ~ ` ... -- => != == <= >=
"""
# One action, or one accessibility line, per line. Kept as text so the corpus is fixed even if the grammar grows.
_ACTIONS = """\
click(id="search")
click(x=500, y=320)
type(id="to", text="Berlin")
type(id="search", text="weather in London", enter=true)
scroll(direction="down", amount=3)
scroll(direction="up", id="list")
swipe(from_x=500, from_y=800, to_x=500, to_y=200)
drag(from_id="card-1", to_id="done")
key(key="Enter")
hotkey(keys=["Control", "a"])
long_press(id="msg-m2", duration_ms=800)
open_app(name="Settings")
navigate_back()
navigate_home()
wait(seconds=1.5)
answer(text="89")
terminate(status="success")
terminate(status="failure")
"""
_A11Y = """\
[msg-m1] link "Invoice November"
[search] textbox "Search mail"
[btn-send] button "Send"
[to] textbox "To"
[subject] textbox "Subject"
[nav-inbox] link "Inbox (3)"
[h1] heading "Inbox"
[cb-remember] checkbox "Remember me" checked
[sel-country] combobox "Country" value="Germany"
[item-7] listitem "Milk 1 l, $1.29"
[tab-2] tab "Flights" selected
[img-logo] image "Logo"
"""
# Common words of GUI tasks (web, mail, shop, travel, settings); combined below so each occurs several times.
_WORDS = """\
a about above accept access account action active add address after again age agent all allow already also
always amount an and another answer any app apply april archive are area around arrive article as ask at
attach august author auto available back bag balance bank bar be because before begin below best between
bill birthday black blue board book bottom box brand browse budget button buy by calendar call camera can
cancel car card cart category center change channel chart chat check checkout child choose city class clear
click clock close cloud code color column comment company complete confirm contact content continue copy
cost count country create credit currency current customer dark data date day default delete delivery
department description design detail device dialog did different direct disable discount display do document
does done down download draft drag drive drop due each edit email empty enable end enter error event every
example exit expand export false favorite feature february fee field file filter find first flight folder
follow font for form forward free friday friend from full game get give go good group guest had has have
header help here hidden history home hotel hour how icon id if image import in inbox include info input
insert install invoice is it item its january join july june just keep key keyboard label language large
last later layout learn left less let level library light like limit line link list load local location lock
login logout long look low mail main make manage many map march mark may me media meeting member menu
message method middle minute mode monday month more most move movie music my name navigate need network new
news next no none not note notification now number of off offer office ok old on one only open option or
order other our out over page paid panel parent password paste pay payment people phone photo pick place
plan play please point popup post premium press preview price print private product profile project public
quantity query question quick radio rate read ready receipt recent record refresh region remove rename
repeat reply report request reset result return review right room row rule run sale same saturday save
schedule screen scroll search second section security see select send september service session set setting
share shipping shop short show sign size skip slide small sort source start state status step stock store
subject submit subscribe success summary sunday support switch sync system tab table tag task team template
text than thank that the their them then there these they this thursday ticket time title to today toggle
tomorrow tool top total track train transfer trash travel true tuesday turn type under undo unit unread up
update upload url use user value version video view visit volume wait want was watch we weather web website
wednesday week welcome what when where which while who will window with without word work would write year
yes yesterday you your zip zoom berlin paris london tokyo madrid rome vienna amsterdam anna bob carol david
emma frank grace henry
""".split()


def _corpus() -> list[str]:
    """The fixed training text. Combinations make the BPE learn the grammar's recurring pieces as tokens."""
    lines = _SENTENCES.splitlines() + _ACTIONS.splitlines() + _A11Y.splitlines()
    n = len(_WORDS)
    for i, w in enumerate(_WORDS):
        a, b, c = _WORDS[(i * 7 + 1) % n], _WORDS[(i * 13 + 5) % n], _WORDS[(i * 31 + 11) % n]
        lines.append(f"{w.title()} {a} {b}, {c} {w}. The {w} of {a}: {b.title()} {c}!")
        lines.append(
            f'type(id="{a}", text="{w} {b}") [{w}-{i % 9}] button "{w.title()} {c}" {{"{w}": "{a}"}}'
        )
        lines.append(f'{{"role": "user", "content": "Open the {w} {i}", "id": "{w}-{i:03d}", "ok": true}}')
        lines.append(f'{{"action": "click", "args": {{"id": "{w}"}}, "reward": {i / 10:.1f}, "done": false}}')
    lines += [f"click(x={(37 * i) % 1001}, y={(91 * i) % 1001}) {i} {i * 1.5} #{i:04d}" for i in range(400)]
    return lines


def build_tokenizer(vision: bool = False) -> Qwen2Tokenizer:
    """Train a byte-level BPE with Qwen2's own pipeline (NFC, its split regex) on the fixed corpus.

    Qwen2's pipeline, not a generic one, because ``AutoTokenizer`` always rebuilds a ``qwen2`` model's tokenizer
    as ``Qwen2Tokenizer`` from vocab and merges: a differently pre-tokenized BPE would then tokenize differently
    in transformers/vLLM than at training time. Training is deterministic (fixed corpus and order).
    """
    from transformers.models.qwen2 import Qwen2Tokenizer

    chat = TEXT_SPECIAL_TOKENS[1:]
    tok = Qwen2Tokenizer().train_new_from_iterator(
        _corpus(), vocab_size=BPE_VOCAB_SIZE, new_special_tokens=chat, min_frequency=2, show_progress=False
    )
    if vision:
        _set_specials(tok, chat + VISION_SPECIAL_TOKENS)
    tok.model_max_length = 4096
    tok.chat_template = CHAT_TEMPLATE
    return tok


def _set_specials(tok: PreTrainedTokenizerBase, specials: list[str]) -> None:
    """Register ``specials`` (appended after the BPE ids, so shared tokens keep their ids in both models)."""
    tok.add_special_tokens({"additional_special_tokens": specials}, replace_extra_special_tokens=True)


def _save_model(model_cls, config, out_dir: Path, seed: int, stop_ids: list[int]) -> None:
    """Random init under a forked, seeded RNG (callers' RNG untouched), then save as safetensors."""
    import torch

    config.dtype = "float32"  # as vLLM CPU runs it, so greedy tokens match transformers exactly
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_cls(config).to(torch.float32).eval()
    model.generation_config.eos_token_id = stop_ids
    model.generation_config.pad_token_id = config.pad_token_id
    model.save_pretrained(out_dir)


def build_text_model(out_dir: Path, seed: int = 0) -> Path:
    """Write the tiny Qwen2 causal LM (2 layers, hidden 128, head_dim 64, tied embeddings) into out_dir."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer(vision=False)
    eos, _, im_end = tok.convert_tokens_to_ids(TEXT_SPECIAL_TOKENS)
    special = {"eos_token_id": eos, "pad_token_id": eos, "bos_token_id": None}
    config = Qwen2Config(vocab_size=len(tok), tie_word_embeddings=True, **_TEXT_DIMS, **special)
    _save_model(Qwen2ForCausalLM, config, out_dir, seed, [im_end, eos])
    tok.save_pretrained(out_dir)
    return out_dir


def build_vl_model(out_dir: Path, seed: int = 0) -> Path:
    """Write the tiny Idefics3 VLM (llama text stack + 2-layer vision tower, 64 tokens/image) into out_dir."""
    from transformers import Idefics3Config, Idefics3ForConditionalGeneration, Idefics3Processor
    from transformers.models.idefics3 import Idefics3ImageProcessorPil

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer(vision=True)
    eos, _, im_end, image = tok.convert_tokens_to_ids([*TEXT_SPECIAL_TOKENS, "<image>"])
    special = {"eos_token_id": eos, "pad_token_id": eos, "bos_token_id": None}
    text = {"model_type": "llama", "vocab_size": len(tok), "rms_norm_eps": 1e-5, "tie_word_embeddings": False}
    config = Idefics3Config(
        vision_config=dict(_VISION_DIMS),
        text_config={**text, **_TEXT_DIMS, **special},
        scale_factor=2,
        image_token_id=image,
        pad_token_id=eos,
        tie_word_embeddings=False,
    )
    _save_model(Idefics3ForConditionalGeneration, config, out_dir, seed, [im_end, eos])
    # The PIL image processor: the default one needs torchvision. No splitting, so one image = 64 tokens.
    image_processor = Idefics3ImageProcessorPil(
        do_image_splitting=False,
        size={"longest_edge": 448},
        max_image_size={"longest_edge": 448},
        do_pad=True,
    )
    processor = Idefics3Processor(
        image_processor=image_processor,
        tokenizer=tok,
        image_seq_len=IMAGE_TOKENS_PER_IMAGE,
        chat_template=CHAT_TEMPLATE,
    )
    _set_specials(tok, TEXT_SPECIAL_TOKENS[1:] + VISION_SPECIAL_TOKENS)  # the processor overwrote the list
    processor.save_pretrained(out_dir)
    return out_dir


_BUILDERS = {"text": build_text_model, "vl": build_vl_model}


def default_model_dir(kind: str = "text", cache_dir: str | Path | None = None) -> Path:
    """The cached tiny model of ``kind`` ("text" or "vl"), built on first use.

    The build goes to a temp dir next to the target and is renamed into place, so a reader never sees a half
    written model and concurrent builders (several Ray workers) are safe: the first rename wins, the others
    discard their copy. An existing directory is returned at once.
    """
    if kind not in _BUILDERS:
        raise ValueError(f"unknown tiny model kind {kind!r}; expected one of {sorted(_BUILDERS)}")
    root = Path(cache_dir) if cache_dir is not None else Path.home() / ".cache" / "maigym_ray" / "models"
    target = root / f"tiny-{kind}-{VERSION}"
    if (target / "config.json").is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=root))
    try:
        _BUILDERS[kind](tmp)
        os.chmod(tmp, 0o755)
        try:
            os.rename(tmp, target)
        except OSError:
            if not (target / "config.json").is_file():  # the rename failed for another reason than a winner
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def weights_sha256(model_dir: str | Path) -> str:
    """sha256 of the model's weight file: the identity used to check that a build is reproducible."""
    return hashlib.sha256((Path(model_dir) / "model.safetensors").read_bytes()).hexdigest()
