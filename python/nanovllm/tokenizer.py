"""The engine's tokenizer with Hugging Face transformers' method names and defaults.

    tok = llm.get_tokenizer()                       # or AutoTokenizer.from_pretrained(model_dir)
    tok.encode("Hello")                             # list[int] (special tokens per the post-processor)
    tok.decode(ids, skip_special_tokens=False)
    tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                            enable_thinking=False)  # extra kwargs become template variables
"""
import json
import os

from . import _core


def _message_text(message):
    """The text of a message's content (a str, or the last text part of a list of parts)."""
    content = message.get("content", "") if isinstance(message, dict) else ""
    if isinstance(content, list):
        texts = [p.get("text", "") for p in content if isinstance(p, dict) and "text" in p]
        return texts[-1] if texts else ""
    return content if isinstance(content, str) else ""


class Tokenizer:
    """Wraps nanovllm._core.Tokenizer (tokenizer.json + tokenizer_config.json)."""

    def __init__(self, core_tokenizer):
        self._tok = core_tokenizer
        self._config = json.loads(core_tokenizer.tokenizer_config_json)

    @classmethod
    def from_pretrained(cls, path, **kwargs):
        """Loads a model directory's tokenizer files; other keyword arguments are ignored."""
        path = os.fspath(path)
        if not os.path.isfile(os.path.join(path, "tokenizer.json")):
            raise FileNotFoundError(f"no tokenizer.json in {path!r}")
        return cls(_core.Tokenizer.from_dir(path))

    # --- encoding / decoding -----------------------------------------------------------------
    def encode(self, text, add_special_tokens=True, **kwargs):
        if not isinstance(text, str):
            raise TypeError(f"encode() takes a str, got {type(text).__name__}")
        return self._tok.encode(text, add_special_tokens)

    def __call__(self, text, add_special_tokens=True, **kwargs):
        """{"input_ids", "attention_mask"} for a str, or lists of them for a list of str."""
        if isinstance(text, (list, tuple)):
            ids = [self.encode(t, add_special_tokens) for t in text]
            return {"input_ids": ids, "attention_mask": [[1] * len(x) for x in ids]}
        ids = self.encode(text, add_special_tokens)
        return {"input_ids": ids, "attention_mask": [1] * len(ids)}

    def decode(self, token_ids, skip_special_tokens=False, **kwargs):
        if isinstance(token_ids, int) and not isinstance(token_ids, bool):
            token_ids = [token_ids]
        return self._tok.decode(list(token_ids), skip_special_tokens)

    def batch_decode(self, sequences, skip_special_tokens=False, **kwargs):
        return [self.decode(s, skip_special_tokens) for s in sequences]

    def convert_ids_to_tokens(self, ids):
        if isinstance(ids, int):
            return self._tok.id_to_token(ids) or None
        return [self._tok.id_to_token(i) or None for i in ids]

    def convert_tokens_to_ids(self, tokens):
        if isinstance(tokens, str):
            return self._tok.token_to_id(tokens)
        return [self._tok.token_to_id(t) for t in tokens]

    def __len__(self):
        """Vocabulary size including added tokens (HF's len(tokenizer))."""
        return self._tok.vocab_size

    # --- special tokens ----------------------------------------------------------------------
    @property
    def bos_token(self):
        return self._tok.bos_token or None

    @property
    def eos_token(self):
        return self._tok.eos_token or None

    @property
    def bos_token_id(self):
        i = self._tok.bos_token_id
        return None if i < 0 else i

    @property
    def eos_token_id(self):
        return self._tok.token_to_id(self.eos_token) if self.eos_token else None

    @property
    def chat_template(self):
        return self._tok.chat_template or None

    # --- chat templates ----------------------------------------------------------------------
    def apply_chat_template(self, conversation, tools=None, documents=None, chat_template=None,
                            add_generation_prompt=False, continue_final_message=False,
                            tokenize=True, return_dict=False, **kwargs):
        """transformers' apply_chat_template: renders the chat template with `messages`, `tools`,
        `documents`, `add_generation_prompt`, the special tokens and every extra keyword argument
        (e.g. enable_thinking) as template variables. tokenize=True returns token ids (encoded
        without adding special tokens); a list of conversations gives a list of results."""
        if isinstance(conversation, (list, tuple)) and conversation and \
                isinstance(conversation[0], (list, tuple)):
            return [self.apply_chat_template(c, tools, documents, chat_template,
                                             add_generation_prompt, continue_final_message,
                                             tokenize, return_dict, **kwargs)
                    for c in conversation]
        if not isinstance(conversation, (list, tuple)):
            raise TypeError("conversation must be a list of messages (dicts with 'role' and "
                            f"'content'), got {type(conversation).__name__}")
        if continue_final_message and add_generation_prompt:
            raise ValueError("continue_final_message and add_generation_prompt cannot both be set")
        template = chat_template if chat_template is not None else self._tok.chat_template
        if not template:
            raise ValueError("this tokenizer has no chat_template (tokenizer_config.json) and "
                             "none was passed")
        context = {"messages": list(conversation), "tools": tools, "documents": documents,
                   "add_generation_prompt": bool(add_generation_prompt)}
        context.update(self._special_tokens())
        context.update(kwargs)
        try:
            context_json = json.dumps(context, ensure_ascii=False)
        except TypeError as e:
            raise TypeError(f"apply_chat_template: messages and kwargs must be JSON values: {e}") \
                from None
        rendered = _core.render_chat_template(template, context_json)
        if continue_final_message:
            rendered = self._cut_after_final_message(rendered, conversation)
        if not tokenize:
            return rendered
        ids = self._tok.encode(rendered, False)
        return {"input_ids": ids, "attention_mask": [1] * len(ids)} if return_dict else ids

    def _special_tokens(self):
        """bos/eos/unk/pad token strings of tokenizer_config.json (template variables)."""
        out = {}
        for key in ("bos_token", "eos_token", "unk_token", "pad_token"):
            v = self._config.get(key)
            if isinstance(v, dict):
                v = v.get("content")
            if isinstance(v, str):
                out[key] = v
        return out

    @staticmethod
    def _cut_after_final_message(rendered, conversation):
        """Drops what the template appends after the final message (end-of-turn tokens), so
        generation continues that message."""
        final = _message_text(conversation[-1]) if conversation else ""
        for needle in (final, final.strip()):
            if needle and needle in rendered:
                return rendered[:rendered.rindex(needle) + len(needle)]
        raise ValueError("continue_final_message: the final message's content does not appear "
                         "in the rendered chat")


class AutoTokenizer:
    """transformers.AutoTokenizer's entry point for nanovllm's tokenizer."""

    @staticmethod
    def from_pretrained(path, **kwargs):
        return Tokenizer.from_pretrained(path, **kwargs)
