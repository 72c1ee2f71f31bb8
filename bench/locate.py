"""Where a mutation's text is in its file, by Python tokens rather than by characters.

A mutation names the code it changes by a snippet of it (`ALPHA = 0.05`, `if e_class != m_class:`). Matching that
snippet character for character broke the benches whenever a line was re-wrapped, re-indented, re-quoted or had its
comment reworded (a formatter does all four). Here the snippet and the file are both read as token streams with
layout (spaces, line breaks, indentation, comments) left out and strings compared by value, so a snippet matches the
code it names however it is laid out, and only a change of the code itself (another name, another operator, another
constant) makes a mutation stop applying, which tests/test_bench.py then names.
"""

import ast
import functools
import io
import tokenize

LAYOUT = {tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.COMMENT, tokenize.ENDMARKER}


def _offsets(text):
    """(line, column) -> character offset in `text`."""
    starts, total = [0], 0
    for line in text.splitlines(keepends=True):
        total += len(line)
        starts.append(total)
    return lambda row, col: starts[row - 1] + col


def _value(token):
    if token.type == tokenize.STRING:
        try:
            return ("str", ast.literal_eval(token.string))
        except (ValueError, SyntaxError):  # an f-string: compared as written
            return ("str", token.string)
    return (token.type if token.type != tokenize.OP else token.exact_type, token.string)


@functools.lru_cache(maxsize=64)  # a bench and its test look up many snippets in the same few files
def tokens(text):
    """The code tokens of `text` (a whole file or a fragment of one) as (value, start, end) character offsets."""
    offset = _offsets(text)
    found = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type not in LAYOUT:
                found.append((_value(token), offset(*token.start), offset(*token.end)))
    except (tokenize.TokenError, IndentationError):  # a fragment that opens a bracket it does not close
        pass
    return tuple(found)


def spans(text, snippet):
    """Every (start, end) character span of `text` whose code tokens are the snippet's."""
    want = [value for value, _, _ in tokens(snippet)]
    have = tokens(text)
    if not want:
        return []
    return [
        (have[i][1], have[i + len(want) - 1][2])
        for i in range(len(have) - len(want) + 1)
        if have[i][0] == want[0] and [value for value, _, _ in have[i : i + len(want)]] == want
    ]


def count(text, snippet):
    return len(spans(text, snippet))


def apply(text, old, new):
    """`text` with the one occurrence of `old` (by tokens) replaced by `new`; ValueError unless it occurs once.

    `new` is laid out as the snippets are written, indented as `old` is: its first line takes the place of the matched
    code, and its further lines keep their indentation relative to that first line, moved to the column the code
    starts at in `text`."""
    found = spans(text, old)
    if len(found) != 1:
        raise ValueError(f"{old!r} occurs {len(found)} times")
    start, end = found[0]
    indent = len(old) - len(old.lstrip(" "))
    shift = start - (text.rfind("\n", 0, start) + 1) - indent
    if old.endswith("\n") and new.endswith("\n"):  # the match ends at the last token, not at its line's end
        new = new[:-1]
    first, *rest = new.split("\n")
    lines = [first[min(indent, len(first) - len(first.lstrip(" "))) :]]
    for line in rest:
        lines.append(" " * shift + line if shift >= 0 else line[min(-shift, len(line) - len(line.lstrip(" "))) :])
    mutated = text[:start] + "\n".join(lines) + text[end:]
    try:
        compile(mutated, "<mutated>", "exec")
    except SyntaxError as e:  # a broken file fails every test: that would count as a kill it is not
        raise ValueError(f"replacing {old!r} leaves a syntax error: {e}") from None
    return mutated
