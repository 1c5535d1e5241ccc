"""pretok_regex.py LIBAMPX — ampx's pre-split (ampx_pretokenize_next, hand-written over UTF-8)
against Python's `regex` module running GPT-2's expression on the same strings: random
strings of letters (ASCII, accented, CJK), digits (ASCII, Arabic-Indic, Roman numerals),
apostrophes and contractions, Unicode spaces and newlines, punctuation, symbols, marks and
control characters, each compared chunk boundary by chunk boundary. Skips (exit 77) when the
`regex` module is not installed: it is a cross-check of the tables, not a build dependency."""
import ctypes
import random
import sys

try:
    import regex
except ImportError:
    print("pretok_regex: skipped: Python's regex module is not installed (pip install regex)")
    sys.exit(77)

GPT2 = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
PIECES = (list("abcXYZéßøñ") + ["中", "文", "字", "ㄱ"] + list("0123456789") + ["٣", "٤", "Ⅻ", "½"] +
          ["'", "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "’s"] +
          [" ", "  ", "\t", "\n", "\n\n", "\r\n", "\u00a0", "\u2003", "\u3000", "\u0085", "\u2028"] +
          list(".,;:!?-()[]{}\"#$%&*+/<=>@\\^_`|~") + ["\u0301", "€", "😀", "\x00", "\x01", "\x7f"])


def ampx_chunks(lib, text):
    b = text.encode("utf-8")
    buf = ctypes.create_string_buffer(b, len(b))
    out, i = [], 0
    while i < len(b):
        j = lib.ampx_pretokenize_next(buf, len(b), i)
        if not i < j <= len(b):
            raise AssertionError(f"ampx_pretokenize_next({text!r}, {i}) = {j}")
        out.append(b[i:j])
        i = j
    return out


def main():
    lib = ctypes.CDLL(sys.argv[1])
    lib.ampx_pretokenize_next.restype = ctypes.c_size_t
    lib.ampx_pretokenize_next.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_size_t]
    rng = random.Random(20261204)
    bad = 0
    for case in range(20000):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 24)))
        want = [m.encode("utf-8") for m in GPT2.findall(text)]
        got = ampx_chunks(lib, text)
        if got != want:
            bad += 1
            if bad <= 5:
                print(f"case {case}: {text!r}\n  regex: {want}\n  ampx:  {got}")
    print(f"pretok_regex: {20000 - bad} passed, {bad} failed")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
