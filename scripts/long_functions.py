#!/usr/bin/env python3
"""Lists the functions of keel's sources longer than a number of lines, longest first.

Usage: scripts/long_functions.py [--over N] [--fail] [--allow PATH:NAME ...] [DIR_OR_FILE ...]
  --over N      list functions of more than N lines (default 100); a function's length runs
                from the first line of its signature to its closing brace
  --fail        exit with status 1 when a listed function is not allowed (the ctest
                House.NoProductionFunctionOver100Lines, tests/scripts/CMakeLists.txt)
  --allow P:N   a function that --fail tolerates: N as listed, in a file whose path ends in P
  DIR_OR_FILE   what to read (default: probe shared app under the repository root); C++ and
                CUDA sources (.cpp .hpp .cu .cuh) and Python (.py)

Self-contained on purpose (Python's standard library only), so CI needs no pip package for it.
C++ is read with a brace scanner rather than a compiler: it strips comments, literals and
preprocessor lines, then takes every brace at namespace or class scope whose header has a
parameter list as a function body. A lambda or local class counts toward the function around
it, as it makes that function longer to read.
"""

import argparse
import ast
import os
import re
import sys
from dataclasses import dataclass

CPP_SUFFIXES = (".cpp", ".hpp", ".cu", ".cuh")
DEFAULT_ROOTS = ("probe", "shared", "app")
# Braces after these open a block that is not a function, though a parenthesis may precede them.
TYPE_KEYWORDS = ("class", "struct", "union", "enum")
NOT_A_FUNCTION_NAME = {
    "if", "for", "while", "switch", "catch", "return", "sizeof", "alignof", "alignas",
    "decltype", "noexcept", "static_assert", "__attribute__", "__declspec", "requires",
}


@dataclass
class Function:
    path: str
    name: str
    first_line: int
    last_line: int

    @property
    def lines(self):
        return self.last_line - self.first_line + 1


def blank_out_comments_and_literals(text):
    """The source with comments, string and character literals and preprocessor lines replaced
    by spaces, newlines kept, so that every brace left is code and line numbers still hold."""
    out = list(text)
    i, n = 0, len(text)
    at_line_start = True

    def blank(start, end):
        for k in range(start, end):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if c == "\n":
            at_line_start = True
            i += 1
            continue
        if at_line_start and c == "#":
            end = i
            while end < n and not (text[end] == "\n" and text[end - 1] != "\\"):
                end += 1
            blank(i, end)
            i = end
            continue
        if not c.isspace():
            at_line_start = False
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end == -1 else end
            blank(i, end)
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end == -1 else end + 2
            blank(i, end)
            i = end
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not _is_word(text[i - 1])):
            open_paren = text.find("(", i + 2)
            delimiter = text[i + 2:open_paren]
            end = text.find(")" + delimiter + '"', open_paren)
            end = n if end == -1 else end + len(delimiter) + 2
            blank(i, end)
            i = end
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():
                i += 1  # a digit separator, as in 1'000'000
                continue
            end = i + 1
            while end < n and text[end] != c and text[end] != "\n":
                end += 2 if text[end] == "\\" else 1
            blank(i, min(end + 1, n))
            i = end + 1
        else:
            i += 1
    return "".join(out)


def _is_word(c):
    return c.isalnum() or c == "_"


def _top_level_groups(header):
    """(start, end) of each parenthesized group at depth 0 in the header."""
    groups, depth, start = [], 0, 0
    for k, c in enumerate(header):
        if c == "(":
            if depth == 0:
                start = k
            depth += 1
        elif c == ")" and depth > 0:
            depth -= 1
            if depth == 0:
                groups.append((start, k))
    return groups


def _name_before(header, paren):
    """The (possibly qualified) name written just before the parenthesis at `paren`."""
    m = re.search(r"((?:[A-Za-z_]\w*\s*::\s*)*~?\s*(?:operator\s*(?:\(\)|[^\w\s(]+|\w[\w\s:<>*&]*?)|[A-Za-z_]\w*))\s*$",
                  header[:paren])
    return re.sub(r"\s+", "", m.group(1)) if m else ""


def function_name(header):
    """The name of the function whose body follows `header`, or None when the brace after it
    opens something else: an initializer, a type, a namespace."""
    # operator()'s own parentheses are its name, not its parameter list.
    flat = re.sub(r"\boperator\s*\(\s*\)", "operator_call_", header.strip())
    if not flat or "(" not in flat:
        return None
    first_paren = flat.index("(")
    before = re.sub(r"operator\s*(==|!=|<=|>=|<=>|=)", "operator", flat[:first_paren])
    if "=" in before:
        return None  # a variable's initializer, a lambda assigned at namespace scope
    if re.match(r"^(template\s*<.*>\s*)?(" + "|".join(TYPE_KEYWORDS) + r")\b", flat, re.S):
        return None
    for start, end in _top_level_groups(flat):
        name = _name_before(flat, start)
        if name and name.split("::")[-1] not in NOT_A_FUNCTION_NAME and _outside_angles(flat, start):
            # In a constructor's initializer list, a brace after a member's name initializes it.
            in_initializer_list = re.search(r"(?<!:):(?!:)", flat[end + 1:]) is not None
            if in_initializer_list and not flat.endswith((")", "}")):
                return None
            return name.replace("operator_call_", "operator()")
    return None


def _outside_angles(header, position):
    """Whether `position` lies outside any template argument list, as in the `(` of
    `std::function<void(int)> make()`, which is not the parameter list."""
    depth = 0
    for k in range(position):
        c = header[k]
        if c == "<" and not header.startswith("<<", k) and not header[max(0, k - 8):k].rstrip().endswith("operator"):
            depth += 1
        elif c == ">" and depth > 0 and header[k - 1] != "-":
            depth -= 1
    return depth == 0


def cpp_functions(path, text):
    """Every function body at namespace or class scope in one C++ source."""
    code = blank_out_comments_and_literals(text)
    functions = []
    header_start = 0
    k, n = 0, len(code)
    while k < n:
        c = code[k]
        if c in ";}" or (c == ":" and _is_access_label(code, header_start, k)):
            header_start = k + 1  # a declaration, or a namespace or class, ended
        elif c == "{":
            header = code[header_start:k]
            name = function_name(header)
            close = _matching_brace(code, k)
            if name is not None:
                first = header_start + len(header) - len(header.lstrip())
                functions.append(Function(path, name, _line_of(code, first), _line_of(code, close)))
                k = close
                header_start = close + 1
            elif _opens_scope(header):
                header_start = k + 1  # into a namespace or class: its functions are measured
            else:
                k = close  # an initializer: the header goes on, as in a constructor's `y_{b}`
        k += 1
    return functions


def _is_access_label(code, header_start, colon):
    return re.fullmatch(r"\s*(public|protected|private)\s*", code[header_start:colon]) is not None


def _opens_scope(header):
    flat = " ".join(header.split())
    return (re.search(r"\b(namespace|class|struct|union)\b", flat) is not None and "=" not in flat) or \
        flat.startswith("extern")


def _matching_brace(code, open_brace):
    depth = 0
    for k in range(open_brace, len(code)):
        if code[k] == "{":
            depth += 1
        elif code[k] == "}":
            depth -= 1
            if depth == 0:
                return k
    return len(code) - 1


def _line_of(code, position):
    return code.count("\n", 0, position) + 1


def python_functions(path, text):
    """Every function and method of one Python source, decorators included."""
    functions = []
    for node in ast.walk(ast.parse(text, filename=path)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            functions.append(Function(path, node.name, first, node.end_lineno))
    return functions


def functions_in(path):
    with open(path, encoding="utf-8") as source:
        text = source.read()
    if path.endswith(".py"):
        return python_functions(path, text)
    return cpp_functions(path, text)


def sources_under(roots):
    for root in roots:
        if os.path.isfile(root):
            yield root
            continue
        for folder, subfolders, files in os.walk(root):
            subfolders[:] = sorted(d for d in subfolders if not d.startswith(".") and d != "build")
            for name in sorted(files):
                if name.endswith(CPP_SUFFIXES + (".py",)):
                    yield os.path.join(folder, name)


def is_allowed(function, allowed):
    path = function.path.replace(os.sep, "/")
    return any(path.endswith(suffix) and function.name == name for suffix, name in allowed)


def shown_path(path, repository):
    """The path from the repository's root for its own files; any other as it was found."""
    absolute = os.path.abspath(path)
    return os.path.relpath(absolute, repository) if absolute.startswith(repository + os.sep) else path


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--over", type=int, default=100, metavar="N")
    parser.add_argument("--fail", action="store_true")
    parser.add_argument("--allow", action="append", default=[], metavar="PATH:NAME")
    parser.add_argument("roots", nargs="*")
    args = parser.parse_args(argv)
    repository = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    roots = args.roots or [os.path.join(repository, r) for r in DEFAULT_ROOTS]
    allowed = [tuple(entry.split(":", 1)) for entry in args.allow]

    long_functions = [f for path in sources_under(roots) for f in functions_in(path) if f.lines > args.over]
    long_functions.sort(key=lambda f: (-f.lines, f.path, f.first_line))
    failing = 0
    for f in long_functions:
        note = ""
        if args.fail:
            if is_allowed(f, allowed):
                note = "  (allowed for now)"
            else:
                note = "  (too long)"
                failing += 1
        print(f"{f.lines:5d}  {shown_path(f.path, repository)}:{f.first_line}  {f.name}{note}")
    if args.fail and failing:
        print(f"{failing} function(s) over {args.over} lines: split each into helpers named for "
              f"what they do", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
