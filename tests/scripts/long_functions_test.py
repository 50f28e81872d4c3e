"""Tests of scripts/long_functions.py: what it takes for a function, how long, and that --fail
fails on a function one line too long (the ctest House.NoProductionFunctionOver100Lines)."""

import io
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import long_functions  # noqa: E402


def lengths(source):
    return {f.name: f.lines for f in long_functions.cpp_functions("x.cpp", source)}


def body(lines):
    return "".join(f"  int v{i} = {i};\n" for i in range(lines))


class CppFunctionsTest(unittest.TestCase):
    def test_a_function_runs_from_its_signature_to_its_closing_brace(self):
        self.assertEqual(lengths("int f(int a,\n      int b) {\n  return a;\n}\n"), {"f": 4})

    def test_functions_in_namespaces_and_classes_are_found_with_their_qualified_names(self):
        source = ("namespace keel::app {\nnamespace {\nvoid helper() {}\n}\n"
                  "class View {\n public:\n  void draw() {\n    x();\n  }\n};\n"
                  "bool View::visible() const noexcept {\n  return true;\n}\n}\n")
        self.assertEqual(lengths(source), {"helper": 1, "draw": 3, "View::visible": 3})

    def test_braces_in_comments_strings_and_raw_strings_are_not_code(self):
        source = ('void f() {\n  // }\n  /* } */\n  const char* s = "}";\n  char c = \'}\';\n'
                  '  auto r = R"x(})x";\n}\nvoid g() {}\n')
        self.assertEqual(lengths(source), {"f": 7, "g": 1})

    def test_a_constructors_brace_initialised_members_belong_to_its_signature(self):
        source = "Foo::Foo(int a)\n    : a_{a},\n      b_(2) {\n  go();\n}\n"
        self.assertEqual(lengths(source), {"Foo::Foo": 5})

    def test_initializers_types_and_lambdas_at_namespace_scope_are_not_functions(self):
        source = ("const int kTable[] = {1, 2};\nstruct P { int x; };\nenum class E : int { kA, kB };\n"
                  "const auto kF = [](int x) {\n  return x;\n};\nstd::function<void(int)> make() {\n  return {};\n}\n")
        self.assertEqual(lengths(source), {"make": 3})

    def test_lambdas_and_control_blocks_count_toward_the_function_around_them(self):
        source = "void f() {\n  auto g = [] {\n    if (x) {\n    }\n  };\n}\n"
        self.assertEqual(lengths(source), {"f": 6})

    def test_operators_are_named_with_their_symbol(self):
        source = "struct A {\n  int operator()(int a) const {\n    return a;\n  }\n  bool operator==(const A&) const;\n};\n"
        self.assertEqual(lengths(source), {"operator()": 3})

    def test_a_macro_with_a_body_is_named_by_the_macro(self):
        self.assertEqual(lengths("PYBIND11_MODULE(_keel, m) {\n  m.def();\n}\n"), {"PYBIND11_MODULE": 3})

    def test_preprocessor_lines_are_not_code(self):
        self.assertEqual(lengths("#define BLOCK(x) { x }\n#include <vector>\nvoid f() {\n}\n"), {"f": 2})


class PythonFunctionsTest(unittest.TestCase):
    def test_a_function_counts_its_decorators(self):
        source = "@decorate\ndef f():\n    return 1\n"
        functions = long_functions.python_functions("x.py", source)
        self.assertEqual([(f.name, f.lines) for f in functions], [("f", 3)])


class FailTest(unittest.TestCase):
    def run_on(self, source, *extra):
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "long.cpp")
            with open(path, "w", encoding="utf-8") as out:
                out.write(source)
            with redirect_stdout(io.StringIO()) as listed, redirect_stderr(io.StringIO()):
                status = long_functions.main(["--fail", *extra, folder])
        return status, listed.getvalue()

    def test_a_function_of_100_lines_passes(self):
        self.assertEqual(self.run_on("void f() {\n" + body(98) + "}\n")[0], 0)

    def test_a_function_of_101_lines_fails_and_is_listed(self):
        status, listed = self.run_on("void f() {\n" + body(99) + "}\n")
        self.assertEqual(status, 1)
        self.assertIn("101", listed)
        self.assertIn("long.cpp:1  f  (too long)", listed)

    def test_an_allowed_function_passes_and_is_still_listed(self):
        status, listed = self.run_on("void f() {\n" + body(99) + "}\n", "--allow", "long.cpp:f")
        self.assertEqual(status, 0)
        self.assertIn("f  (allowed for now)", listed)

    def test_an_allowance_may_name_a_member_function(self):
        source = "void View::draw() {\n" + body(99) + "}\n"
        self.assertEqual(self.run_on(source, "--allow", "long.cpp:View::draw")[0], 0)

    def test_an_allowance_names_one_function_of_one_file(self):
        self.assertEqual(self.run_on("void f() {\n" + body(99) + "}\n", "--allow", "other.cpp:f")[0], 1)
        self.assertEqual(self.run_on("void f() {\n" + body(99) + "}\n", "--allow", "long.cpp:g")[0], 1)


if __name__ == "__main__":
    unittest.main()
