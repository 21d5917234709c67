#!/usr/bin/env python3
"""Generates tests/data/tokenizer/golden.tsv: reference token ids for the C tokenizer test.

The ids come from openai/whisper's own tokenizer code (whisper/tokenizer.py of
openai-whisper 20250625, which builds a tiktoken Encoding from the shipped
assets/*.tiktoken files). whisper/__init__.py imports torch, so tokenizer.py is
loaded on its own from the installed package. Setup, once:

    python3 -m venv /tmp/venv
    /tmp/venv/bin/pip install tiktoken
    /tmp/venv/bin/pip install --no-deps openai-whisper==20250625
    /tmp/venv/bin/python tests/tools/gen_tokenizer_golden.py > tests/data/tokenizer/golden.tsv

Output: '#' comment lines, then one line per case with four tab-separated fields:
    kind  hex(utf8 bytes)  gpt2 ids  multilingual ids
kind is "text" for valid UTF-8 (ids = Tokenizer.encode, i.e. tiktoken encode)
or "bytes" for invalid UTF-8 (our defined behaviour, see raw_bytes_encode()).
Ids are space separated; an empty field means no tokens.
The script also checks that whisper's suppress-token sets equal the lists
written in shared/reference/whisper-decoding.md section 4.3 and fails if not.
"""

import importlib.util
import random
import sys
import os

import tiktoken  # noqa: F401  (imported by tokenizer.py; fail early if missing)


def load_whisper_tokenizer_module():
    import importlib.metadata as md

    dist = md.distribution("openai-whisper")
    if dist.version != "20250625":
        sys.exit(f"need openai-whisper 20250625, found {dist.version}")
    path = dist.locate_file("whisper/tokenizer.py")
    spec = importlib.util.spec_from_file_location("whisper_tokenizer", str(path))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def raw_bytes_encode(enc, data):
    """Our defined behaviour for invalid UTF-8 (core/tokenizer.c wd_tokenizer_encode).

    Invalid byte sequences act as barriers that no pre-token crosses: every maximal
    run of valid UTF-8 is encoded like a complete string, every maximal run of
    invalid bytes is one piece that is byte-pair encoded from its raw bytes.
    decode(encode(x)) == x still holds byte for byte.
    """
    text = data.decode("utf-8", errors="surrogateescape")
    ids, run, run_bad = [], [], None
    def flush():
        if not run:
            return
        if run_bad:
            ids.extend(enc._encode_single_piece(bytes(ord(c) - 0xDC00 for c in run)))
        else:
            ids.extend(enc.encode_ordinary("".join(run)))
    for c in text:
        bad = 0xDC80 <= ord(c) <= 0xDCFF
        if run and bad != run_bad:
            flush()
            run = []
        run_bad = bad
        run.append(c)
    flush()
    return ids


def english_sentences():
    return [
        "The quick brown fox jumps over the lazy dog.",
        "And so, my fellow Americans, ask not what your country can do for you; ask what you can do for your country.",
        "The birch canoe slid on the smooth planks.",
        "Glue the sheet to the dark blue background.",
        "It's easy to tell the depth of a well.",
        "These days a chicken leg is a rare dish.",
        "Rice is often served in round bowls.",
        "The juice of lemons makes fine punch.",
        "The box was thrown beside the parked truck.",
        "The hogs were fed chopped corn and garbage.",
        "Four hours of steady work faced us.",
        "A large size in stockings is hard to sell.",
        "The boy was there when the sun rose.",
        "A rod is used to catch pink salmon.",
        "The source of the huge river is the clear spring.",
        "Kick the ball straight and follow through.",
        "Help the woman get back to her feet.",
        "A pot of tea helps to pass the evening.",
        "Smoky fires lack flame and heat.",
        "The soft cushion broke the man's fall.",
        "The salt breeze came across from the sea.",
        "The girl at the booth sold fifty bonds.",
        "When the sunlight strikes raindrops in the air, they act as a prism and form a rainbow.",
        "The rainbow is a division of white light into many beautiful colors.",
        "These take the shape of a long round arch, with its path high above, and its two ends apparently beyond the horizon.",
        "There is, according to legend, a boiling pot of gold at one end.",
        "People look, but no one ever finds it.",
        "When a man looks for something beyond his reach, his friends say he is looking for the pot of gold at the end of the rainbow.",
        "Ten of clubs, eight of spades, four of clubs, seven of hearts.",
        "Go forward ten meters.",
        "Please call Stella. Ask her to bring these things with her from the store.",
        "Six spoons of fresh snow peas, five thick slabs of blue cheese, and maybe a snack for her brother Bob.",
        "We also need a small plastic snake and a big toy frog for the kids.",
        "She can scoop these things into three red bags, and we will go meet her Wednesday at the train station.",
        "Hello world",
        "hello World HELLO wORLD",
        "Transcription by whisperd, a Whisper speech-to-text daemon.",
        "The API returns JSON, text, SRT, VTT or verbose_json.",
        "I think that's right, isn't it?",
        "Well, I'll tell you what we'll do: we're going to need a bigger boat.",
        "You've got to ask yourself one question: do I feel lucky?",
        "She'd have known if they'd told her.",
        "Mr. Smith went to Washington on Jan. 3rd, 1939.",
        "Dr. Jones, Ph.D., M.D., lives at 221B Baker St.",
        "The U.S.A. and the U.K. signed the treaty.",
        "e.g. i.e. etc. vs. cf. a.k.a.",
        " The leading space is how Whisper writes most segments.",
        " and so on",
        "Thank you for watching!",
        "Subtitles by the Amara.org community",
        "(upbeat music)",
        "[MUSIC PLAYING]",
        "♪ Never gonna give you up ♪",
        "- Hey! - What? - Nothing.",
        ">> SPEAKER 1: Good morning.",
        "<< inaudible >>",
        "\"Quoted,\" she said, 'single-quoted.'",
        "The end.",
    ]


def punctuation_cases():
    return [
        "Hello, world!", "Wait... what?!", "Really?!?!", "Yes!!!", "No...", "…", "— em dash — en – dash",
        "a-b-c", "a--b", "a---b", "-(", "-[", "('", "(\"", "((", "))", "(((", ")))", "[[", "]]", "{{", "}}",
        "<<", ">>", "<<<", ">>>", "--", "---", "♪♪", "♪♪♪", "♩", "♫♬", "♭♮♯",
        "#hashtag @mention", "foo_bar_baz", "x*y+z/w", "a=b;c:d", "<tag attr=\"1\"/>",
        "https://example.com/path?q=1&r=2#frag", "user@example.org", "C:\\Windows\\System32",
        "~/src/whisperd", "`code`", "^caret^", "|pipe|", "50% off!", "#1 hit", "&&", "||", "!=", "<=>",
        "「こんにちは」", "『世界』", "¿Qué?", "¡Hola!", "«guillemets»", "„Anführungszeichen“", "“smart quotes”",
        "‘single smart’", "·•◦", "§ 42 ¶", "© ® ™", "° ± × ÷", "€ £ ¥ ₹ ₿", "→ ← ↑ ↓", "∑ ∫ √ ∞ ≠ ≤",
        "<|endoftext|>", "<|startoftranscript|><|en|>", "<|0.00|>",
    ]


def number_cases():
    return [
        "0", "7", "42", "123", "1234", "12345", "123456789", "1234567890" * 5, "3.14159", "-273.15",
        "1,000,000", "1 000 000", "2024-06-25", "10:30am", "$5.99", "€100", "50¢", "1st 2nd 3rd 4th",
        "1/2 3/4", "½ ¾ ⅓", "x² + y³", "H₂O", "１２３", "٣٤٥", "१२३", "〇一二三", "Ⅻ ⅻ", "①②③",
        "+1 (555) 123-4567", "192.168.0.1", "0xDEADBEEF", "1e-9", "v1.2.3", "in 1969 and 2001", "  42  ",
    ]


def whitespace_cases():
    return [
        "", " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "\t\t\tx", "a  b", "a   b", "a\tb",
        "a\nb", "a\n\nb", "a \n b", " leading", "  two leading", "trailing ", "trailing  ", "both  ",
        "   multiple   spaces   between   words   ", "line one\nline two\n", "\n\nstarts with newlines",
        "a\u00a0b", "a \u00a0b", "\u00a0", "\u3000", "a\u3000b", "a\u2003b", "a\u2028b", "a\u2029b",
        "x\u0085y", "a\x0bb\x0cc", "a\u200bb", "a\ufeffb", "a\u180eb", "x \u180ey", "a \u180e b", "tab\t \tspace",
        "end with newline\n", " \t\n\r\x0b\x0c", "a    \n    b", "word \n", "  \n\n  x",
    ]


def contraction_cases():
    return [
        "I'm", "don't", "we'll", "they've", "she'd", "it's", "you're", "I'M", "DON'T", "It'S",
        "’s", "it’s", "rock 'n' roll", "'tis", "'twas", "o'clock", "y'all'd've", "''", "'",
        "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", " 's", "'sss", "'llama", "'dog", "'mmm",
        "the dog's bone", "the dogs' bones", "can't won't shan't", "l'homme d'affaires", "'123",
    ]


def unicode_cases():
    return [
        # Emoji, with modifiers, joiners and flags.
        "😀", "😀😀😀", "👍🏽", "👨‍👩‍👧‍👦", "🇫🇷🇩🇪", "I ❤️ NY", "🎉 party 🎊", "emoji😀inside", "🙂 🙃",
        # CJK.
        "你好，世界！", "我们今天去公园散步。", "中华人民共和国", "今日はいい天気ですね。", "カタカナとひらがな",
        "東京2020オリンピック", "안녕하세요, 세계!", "한국어 텍스트 토큰화", "繁體中文與简体中文",
        "好的，我知道了。谢谢你！",
        # Arabic, Hebrew, Persian.
        "مرحبا بالعالم", "اللغة العربية جميلة.", "شكرا جزيلا", "שלום עולם", "עברית היא שפה",
        "سلام دنیا", "مرحبا 123 world",
        # Cyrillic, Greek.
        "Привет, мир!", "Москва — столица России.", "Слава Україні", "Їжак і ґанок", "Γειά σου Κόσμε",
        "Ελληνικά γράμματα αβγ",
        # Indic and South-East Asian scripts (combining marks are \p{M}, not \p{L}).
        "नमस्ते दुनिया", "हिन्दी भाषा", "বাংলা ভাষা", "தமிழ்", "ภาษาไทยง่ายนิดเดียว", "ສະບາຍດີ",
        "မြန်မာ", "ខ្មែរ", "සිංහල",
        # Accented Latin, composed (NFC) and decomposed (NFD).
        "café", "cafe\u0301", "naïve résumé", "Ångström", "Zürich Straße", "Łódź", "Čeština ěščřžýáíé",
        "São Paulo", "façade", "Ñandú", "Tiếng Việt có dấu", "Tie\u0302\u0301ng Vie\u0323\u0302t", "ÆØÅ æøå",
        "İstanbul ığüşöç", "ǅ ǈ ǋ", "ﬁ ﬂ ﬃ",
        # Mixed scripts.
        "Hello 世界", "Москва is the capital", "the word 'смысл' means meaning", "日本語 and English mixed",
        "Café ☕ и чай 🍵", "α=0.5, β=2", "mix中文English한국어Русский", "abcАБВ", "1а2б3в",
        # Rare planes and specials.
        "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "𝟘𝟙𝟚", "𐍈", "\U0001F600\U0001F64F", "\ufffd", "\x00", "a\x00b", "\x07\x1b[0m",
        "\x7f", "\x1c\x1d\x1e\x1f", "\u0300", " \u0301", "\u200d", "\U000E0041",
    ]


def long_cases():
    rnd = random.Random(1234)
    letters = "abcdefghijklmnopqrstuvwxyz"
    return [
        "Pneumonoultramicroscopicsilicovolcanoconiosis",
        "Donaudampfschiffahrtsgesellschaftskapitän",
        "Rindfleischetikettierungsüberwachungsaufgabenübertragungsgesetz",
        "Llanfairpwllgwyngyllgogerychwyrndrobwllllantysiliogogogoch",
        "a" * 200,
        " " * 100,
        "ab" * 150,
        "".join(rnd.choice(letters) for _ in range(300)),
        "!" * 64,
        "😀" * 40,
        "你" * 100,
        "ж" * 120,
        "the " * 80,
        "supercalifragilisticexpialidocious " * 4,
        "x" * 1000,
        "1234567890" * 30,
        "ab" * 64 + "a",
        "aaab" * 70,
        "zzz" * 50,
        "\u00e9" * 100,
        "Kraftfahrzeughaftpflichtversicherung" * 6,
        " " + "".join(rnd.choice("eeettaaoinshrdlu") for _ in range(400)),
        "\U0001F600\U0001F44D\U0001F3FD" * 30,
    ] + ["".join(rnd.choice(letters + "äöüéèß") for _ in range(rnd.randint(129, 700))) for _ in range(12)]


def fuzz_cases(n):
    rnd = random.Random(20250625)
    pools = [
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
        "0123456789",
        " ", " ", "  ", "\n", "\t",
        ".,!?;:'\"-()[]{}<>/\\@#$%^&*_+=|~`",
        "'s", "'t", "'re", "'ve", "'m", "'ll", "'d",
        "éèêëàâäçñöüßøåœ",
        "你好世界中文字符",
        "こんにちはカタカナ",
        "привет мир",
        "مرحبا",
        "😀👍🏽🎉❤️",
        "\u0301\u0308\u093f\u0e34",
        "\u00a0\u3000\u2003",
        "♪♫♬",
    ]
    out = []
    for _ in range(n):
        length = rnd.randint(1, 40)
        s = "".join(rnd.choice(rnd.choice(pools)) if rnd.random() < 0.8 else rnd.choice(pools)
                    for _ in range(length))
        out.append(s)
    return out


def invalid_utf8_cases():
    return [
        b"\xff", b"\xfe\xff", b"abc\xffdef", b"\x80", b"caf\xe9", b"\xe4\xb8", b"\xe4\xb8a",
        b"x \xe4\xb8 y", b"\xc3\x28", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf", b"\xe0\x80\xaf",
        b"Hello \xff\xfe world", b"\xf0\x9f\x98", b"ok\xf0\x9f\x98\x80\xf0\x9f", b" \x80\x81\x82 ",
        b"  \xff  ", b"\xffI'm\xff", b"\x80" * 20,
    ]


DOC_ML = [1, 2, 7, 8, 9, 10, 14, 25, 26, 27, 28, 29, 31, 58, 59, 60, 61, 62, 63, 90, 91, 92, 93, 359, 503,
          522, 542, 873, 893, 902, 918, 922, 931, 1350, 1853, 1982, 2460, 2627, 3246, 3253, 3268, 3536, 3846,
          3961, 4183, 4667, 6585, 6647, 7273, 9061, 9383, 10428, 10929, 11938, 12033, 12331, 12562, 13793,
          14157, 14635, 15265, 15618, 16553, 16604, 18362, 18956, 20075, 21675, 22520, 26130, 26161, 26435,
          28279, 29464, 31650, 32302, 32470, 36865, 42863, 47425, 49870, 50254]
DOC_EN = [1, 2, 7, 8, 9, 10, 14, 25, 26, 27, 28, 29, 31, 58, 59, 60, 61, 62, 63, 90, 91, 92, 93, 357, 366,
          438, 532, 685, 705, 796, 930, 1058, 1220, 1267, 1279, 1303, 1343, 1377, 1391, 1635, 1782, 1875,
          2162, 2361, 2488, 3467, 4008, 4211, 4600, 4808, 5299, 5855, 6329, 7203, 9609, 9959, 10563, 10786,
          11420, 11709, 11907, 13163, 13697, 13700, 14808, 15306, 16410, 16791, 17992, 19203, 19510, 20724,
          22305, 22935, 27007, 30109, 30420, 33409, 34949, 40283, 40493, 40549, 47282, 49146]


def check_suppress(tok, doc_non_speech):
    """Reproduces decoding.py _get_suppress_tokens("-1") and compares with the reference doc."""
    if list(tok.non_speech_tokens) != doc_non_speech:
        sys.exit("non_speech_tokens differ from whisper-decoding.md 4.3")
    s = set(tok.non_speech_tokens)
    s |= {tok.transcribe, tok.translate, tok.sot, tok.sot_prev, tok.sot_lm, tok.no_speech}
    return sorted(s)


def main():
    m = load_whisper_tokenizer_module()
    en = m.get_tokenizer(False)
    ml = m.get_tokenizer(True, num_languages=99)
    v3 = m.get_tokenizer(True, num_languages=100)
    sup_en = check_suppress(en, DOC_EN)
    sup_ml = check_suppress(ml, DOC_ML)
    sup_v3 = check_suppress(v3, DOC_ML)

    texts = (english_sentences() + punctuation_cases() + number_cases() + whitespace_cases()
             + contraction_cases() + unicode_cases() + long_cases() + fuzz_cases(160))
    seen, cases = set(), []
    for s in texts:
        if s not in seen:
            seen.add(s)
            cases.append(s)

    out = sys.stdout
    out.write("# Generated by tests/tools/gen_tokenizer_golden.py from openai-whisper 20250625\n")
    out.write("# (whisper/tokenizer.py + tiktoken %s). Do not edit.\n" % tiktoken.__version__)
    out.write("# kind\thex(utf8)\tgpt2 ids\tmultilingual ids\n")
    out.write("# suppress(-1) gpt2: %s\n" % " ".join(map(str, sup_en)))
    out.write("# suppress(-1) multilingual: %s\n" % " ".join(map(str, sup_ml)))
    out.write("# suppress(-1) large-v3: %s\n" % " ".join(map(str, sup_v3)))
    for s in cases:
        # Text that looks like a special token is encoded as ordinary text (encode_ordinary);
        # Tokenizer.encode() would refuse it.
        if "<|" in s:
            ids_en, ids_ml = en.encoding.encode_ordinary(s), ml.encoding.encode_ordinary(s)
        else:
            ids_en, ids_ml = en.encode(s), ml.encode(s)
        assert en.decode(ids_en) == s and ml.decode(ids_ml) == s
        out.write("text\t%s\t%s\t%s\n" % (s.encode("utf-8").hex(), " ".join(map(str, ids_en)),
                                          " ".join(map(str, ids_ml))))
    for b in invalid_utf8_cases():
        ids_en, ids_ml = raw_bytes_encode(en.encoding, b), raw_bytes_encode(ml.encoding, b)
        assert en.encoding.decode_bytes(ids_en) == b and ml.encoding.decode_bytes(ids_ml) == b
        out.write("bytes\t%s\t%s\t%s\n" % (b.hex(), " ".join(map(str, ids_en)), " ".join(map(str, ids_ml))))
    print("%d cases" % (len(cases) + len(invalid_utf8_cases())), file=sys.stderr)


if __name__ == "__main__":
    main()
