"""verigrad's tokenizer against transformers' tokenizer built from the same GGUF file (SmolLM2-135M-
Instruct): the same ids on a corpus of 200+ strings, the same text back, the same chat template output."""

from __future__ import annotations

import pytest

from verigrad.io.tokenizer import Tokenizer

BASE = [
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "hello world",
    "HELLO WORLD",
    "Hello",
    " Hello",
    "  Hello",
    "\tHello",
    "Hello\n",
    "Hello\n\n\n",
    "a\n b\n  c\n   d",
    "    indented four",
    "trailing spaces   ",
    "\r\nWindows\r\nlines\r\n",
    "multiple     spaces     inside",
    "\u00a0non-breaking\u00a0space",
    "zero\u200bwidth\u200bspace",
    "I'm, you're, he's, they've, we'll, she'd",
    "It'S MIXED 'case' contractions",
    "don't stop",
    "12345",
    "3.14159265358979",
    "-42 +17 1e-10 0x1F 0b1010",
    "1,000,000 and 2.5%",
    "Call 555-123-4567 on 2024-01-31 at 10:30",
    "v1.2.3-beta+build.45",
    "x² + y³ = z⁴, ½ + ¼ = ¾",
    "٣٤٥ Arabic-Indic digits, ४२ Devanagari",
    "①②③ circled, Ⅻ roman",
    "café naïve résumé façade",
    "Zürich Größe Straße",
    "Ελληνικά γράμματα",
    "Русский текст, ёжик",
    "עברית מימין לשמאל",
    "العربية من اليمين",
    "हिन्दी भाषा",
    "日本語のテキストです。",
    "中文文本，一个例子。",  # noqa: RUF001 (the full-width comma is the point)
    "한국어 텍스트",
    "ไทย ภาษา",
    "Tiếng Việt có dấu",
    "emoji 😀 😃 😄",
    "👍🏽 skin tone, 👨‍👩‍👧‍👦 family",
    "flags 🇫🇷🇯🇵🇺🇸",
    "🤖🚀✨🔥💯",
    "math ∑∫∂√∞≠≤≥",
    "arrows ←↑→↓ ⇒ ⇔",
    "box ┌─┐│└─┘",
    "combining e\u0301 a\u0308 n\u0303",
    "def f(x):\n    return x ** 2\n",
    "for (int i = 0; i < n; ++i) { sum += a[i]; }",
    '#include <stdio.h>\nint main(void) { printf("hi\\n"); }',
    "SELECT * FROM users WHERE id = 42;",
    '<div class="x">text</div>',
    '{"key": [1, 2, {"nested": null}]}',
    "https://example.com/path?q=1&r=2#frag",
    "user@example.com",
    "C:\\Windows\\System32\\drivers",
    "$ ls -la | grep '.py' > out.txt 2>&1",
    "lambda x: x if x else None",
    "```python\nprint('hi')\n```",
    "    \n\t\n",
    "!!!???...,,,;;;",
    "---===+++***",
    "a-b_c.d/e\\f|g",
    "(((nested)))[[[]]]{{{}}}",
    "~`@#$%^&*()",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>system\nYou are helpful.<|im_end|>",
    "text<|endoftext|>more text",
    "<|im_end|><|im_start|>",
    "<|im_start|> spaced <|im_end|>",
    "<|im_start|user",
    "<repo_name>verigrad<file_sep>cli.py",
    "<jupyter_code>x = 1<jupyter_output>",
    "<|IM_START|> not special",
    "<think>reasoning</think>",
    "SmolLM2 is a 135M-parameter model.",
    "supercalifragilisticexpialidocious",
    "pneumonoultramicroscopicsilicovolcanoconiosis",
    "The year 1999 and 2000.",
    "A\tB\tC\n1\t2\t3",
    "",
    " ",
    "\n",
    "a",
    "ä",
    "\x00\x01\x02 control chars \x7f",
    "mixed日本語and English",
    "Ünïcödé wïth spaces  and\ttabs",
]


def corpus() -> list[str]:
    """The base strings, and each one after a space, before a newline, and inside a chat turn."""
    out = list(BASE)
    out += [" " + s for s in BASE[:60]]
    out += [s + "\n" for s in BASE[20:60]]
    out += [f"<|im_start|>user\n{s}<|im_end|>\n" for s in BASE[40:80]]
    return list(dict.fromkeys(out))  # without repeats


CONVERSATIONS = [
    [{"role": "user", "content": "Hi!"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+2?"}],
    [
        {"role": "user", "content": "Name a colour."},
        {"role": "assistant", "content": "Blue."},
        {"role": "user", "content": "Another, in 日本語 😀"},
    ],
]


@pytest.fixture(scope="module")
def tokenizers(smollm2_gguf):
    from transformers import AutoTokenizer

    theirs = AutoTokenizer.from_pretrained(str(smollm2_gguf.parent), gguf_file=smollm2_gguf.name)
    return Tokenizer.from_gguf(smollm2_gguf), theirs


def test_corpus_is_large_enough():
    assert len(corpus()) >= 200


def test_same_ids_as_transformers(tokenizers):
    ours, theirs = tokenizers
    for text in corpus():
        assert ours.encode(text) == theirs.encode(text), repr(text)


def test_decode_gives_the_text_back(tokenizers):
    ours, theirs = tokenizers
    for text in corpus():
        ids = ours.encode(text)
        assert ours.decode(ids) == text == theirs.decode(ids), repr(text)
        stream = ours.stream()
        assert "".join(stream.push(i) for i in ids) + stream.flush() == text


def test_special_tokens_and_ids_agree(tokenizers):
    ours, theirs = tokenizers
    assert (ours.bos_id, ours.eos_id, ours.add_bos) == (1, 2, False)
    assert ours.bos_id == theirs.convert_tokens_to_ids(theirs.bos_token)
    assert ours.eos_id == theirs.convert_tokens_to_ids(theirs.eos_token)
    assert set(ours.special_tokens) == set(theirs.all_special_tokens) | set(ours.special_tokens)
    assert len(ours.special_tokens) == 17 and ours.vocab_size == len(theirs) == 49152


def test_same_chat_template_output(tokenizers):
    ours, theirs = tokenizers
    for messages in CONVERSATIONS:
        for prompt in (True, False):
            expected = theirs.apply_chat_template(messages, tokenize=False, add_generation_prompt=prompt)
            assert ours.apply_chat_template(messages, add_generation_prompt=prompt) == expected
