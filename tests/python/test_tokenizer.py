"""llm.get_tokenizer() / AutoTokenizer behave like the HF tokenizer: encode/decode against the
shared Qwen3 vectors (ids from two independent JavaScript implementations), apply_chat_template
against Python jinja2 configured as transformers configures it (tests/e2e/test_chat_template.py)
and against the shared Qwen3 renderings, including enable_thinking=False and tokenize=True."""
import json
import os
import sys

import pytest

from conftest import SHARED, SRC
from nanovllm import LLM, AutoTokenizer

sys.path.insert(0, os.path.join(SRC, "tests", "e2e"))
from test_chat_template import TemplateRaised, make_env  # noqa: E402  (jinja2 reference)

VECTORS = os.path.join(SHARED, "tokenizer-tests", "qwen3_vectors.json")
RENDERINGS = os.path.join(SHARED, "tokenizer-tests", "qwen3_chat_template.json")
CASES = os.path.join(SRC, "tests", "fixtures", "chat_templates", "cases.json")


@pytest.fixture(scope="module")
def tok(tiny_model):
    return LLM(tiny_model, num_kvcache_blocks=8).get_tokenizer()


def load(path):
    if not os.path.exists(path):
        pytest.skip(f"{path} missing (shared test data)")
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def test_encode_decode_vectors(tok):
    cases = load(VECTORS)["cases"]
    for c in cases:
        assert tok.encode(c["text"], add_special_tokens=False) == c["ids"], c["text"]
        assert tok.encode(c["text"]) == c["ids_with_special_tokens"], c["text"]
        assert tok(c["text"])["input_ids"] == c["ids_with_special_tokens"]
        assert tok.decode(c["ids"]) == c["decoded"], c["text"]
    assert len(cases) >= 80


def test_tokenizer_basics(tok, tiny_model):
    assert tok.eos_token == "<|im_end|>" and tok.eos_token_id == 151645
    assert tok.bos_token is None and tok.bos_token_id is None
    assert len(tok) == 151669  # 151643 byte-level BPE tokens + 26 added tokens
    assert tok.convert_tokens_to_ids("<|im_start|>") == 151644
    assert tok.convert_ids_to_tokens([151644, 9707]) == ["<|im_start|>", "Hello"]
    assert tok.decode(151645) == "<|im_end|>" and tok.decode([151645], skip_special_tokens=True) == ""
    standalone = AutoTokenizer.from_pretrained(tiny_model)
    assert standalone.encode("Hello world") == tok.encode("Hello world") == [9707, 1879]


def test_chat_template_matches_jinja2(tok):
    env = make_env()
    template = env.from_string(tok.chat_template)
    cases = load(CASES)["cases"]
    checked = 0
    for case in cases:
        kwargs = {k: case[k] for k in ("enable_thinking",) if k in case}
        ctx = dict(messages=case["messages"], tools=case.get("tools"),
                   add_generation_prompt=case.get("add_generation_prompt", False),
                   eos_token=tok.eos_token, pad_token="<|endoftext|>", **kwargs)
        try:
            want = template.render(**ctx)
        except TemplateRaised as e:
            with pytest.raises(ValueError, match=str(e)):
                tok.apply_chat_template(case["messages"], tools=case.get("tools"), tokenize=False,
                                        add_generation_prompt=ctx["add_generation_prompt"], **kwargs)
            continue
        except Exception:  # jinja2 itself fails on this case (e.g. list content): not comparable
            continue
        got = tok.apply_chat_template(case["messages"], tools=case.get("tools"), tokenize=False,
                                      add_generation_prompt=ctx["add_generation_prompt"], **kwargs)
        assert got == want, case["name"]
        checked += 1
    assert checked >= len(cases) // 2, f"only {checked} of {len(cases)} cases compared"


def test_chat_template_shared_renderings(tok):
    for chat in load(RENDERINGS)["chats"]:
        kwargs = {"enable_thinking": chat["enable_thinking"]} if "enable_thinking" in chat else {}
        gen = chat.get("add_generation_prompt", False)
        text = tok.apply_chat_template(chat["messages"], tokenize=False, add_generation_prompt=gen,
                                       **kwargs)
        assert text == chat["rendered"], chat["name"]
        # HF's defaults: tokenize=True gives ids (no special tokens added on top).
        assert tok.apply_chat_template(chat["messages"], add_generation_prompt=gen,
                                       **kwargs) == chat["ids"], chat["name"]
        batch = tok.apply_chat_template([chat["messages"]] * 2, tokenize=False,
                                        add_generation_prompt=gen, **kwargs)
        assert batch == [chat["rendered"]] * 2


def test_continue_final_message(tok):
    msgs = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello, I am"}]
    text = tok.apply_chat_template(msgs, tokenize=False, continue_final_message=True)
    assert text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\nHello, I am"), text
    with pytest.raises(ValueError, match="cannot both be set"):
        tok.apply_chat_template(msgs, continue_final_message=True, add_generation_prompt=True)
