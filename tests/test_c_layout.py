# SPDX-License-Identifier: MIT
"""The C core stays readable: no function outside csrc/kernels/ is longer than 80 lines, every C
file that exports something has the header named after it, and the include arrows point one way
(core -> kernels -> platform; the reverse pass apart from its gradient transaction); comments
say why without issue numbers or benchmark figures (those live in benchmarks/)."""
import pathlib
import re

ROOT = pathlib.Path(__file__).parent.parent
CSRC = ROOT / "csrc"
MAX_LINES = 80


def _strip(text):
    """Comments and string/char literals blanked out, newlines kept (so line numbers hold)."""
    pattern = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.DOTALL)
    return pattern.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def _code(path):
    """A C file's code: comments, literals and preprocessor lines blanked, newlines kept."""
    text = _strip(path.read_text())
    # preprocessor lines and their continuations (macros may hold braces) do not count as code
    lines, in_directive = [], False
    for raw in text.split("\n"):
        directive = in_directive or raw.lstrip().startswith("#")
        in_directive = directive and raw.rstrip().endswith("\\")
        lines.append(" " * len(raw) if directive else raw)
    return "\n".join(lines)


def functions(path):
    """(name, first line, last line) of every function definition in a C file."""
    text = _code(path)
    out, depth, head_start, head = [], 0, 0, ""
    line = 1
    start = None
    for ch in text:
        if ch == "{":
            if depth == 0 and re.search(r"\b(\w+)\s*\([^;{}]*\)\s*$", head) and "=" not in head:
                name = re.search(r"\b(\w+)\s*\([^;{}]*\)\s*$", head).group(1)
                start = (name, head_start)
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                if start:
                    out.append((start[0], start[1], line))
                start = None
                head, head_start = "", line + 1
                continue
        elif ch == ";" and depth == 0:
            head, head_start = "", line + 1
            continue
        if depth == 0:
            if not head.strip() and not ch.isspace():
                head_start = line
            head += ch
        if ch == "\n":
            line += 1
    return out


def test_the_length_counter_finds_known_functions():
    found = {name: (a, b) for name, a, b in functions(CSRC / "pd_backward.c")}
    assert {"pd_graph_backward", "block_backward", "head_backward", "capture"} <= set(found)
    a, b = found["capture"]
    assert 5 <= b - a + 1 <= 10


def test_no_core_function_outside_the_kernels_is_longer_than_80_lines():
    long = []
    for path in sorted(CSRC.rglob("*.c")):
        if "kernels" in path.relative_to(CSRC).parts:
            continue
        for name, first, last in functions(path):
            if last - first + 1 > MAX_LINES:
                long.append(f"{path.relative_to(ROOT)}:{first} {name} ({last - first + 1} lines)")
    assert not long, long


def test_every_exporting_c_file_has_its_own_header():
    missing = []
    for path in sorted(CSRC.rglob("*.c")):
        if path.name.startswith("ukernel_"):
            continue  # the per-ISA micro-kernels share ukernel.h
        if path.name.startswith("gemm_small_"):
            continue  # the per-ISA small-product kernels share gemm_small.h
        if path.parent.name == "platform" and path.with_name(path.stem.rsplit("_", 1)[0] + ".h").exists():
            continue  # per-OS backends (pd_thread_posix.c, pd_thread_win32.c) share pd_thread.h
        text = _strip(path.read_text())
        exports = re.findall(r"^(?!static)[a-z_][\w \*]*\b(pd_\w+)\s*\(", text, re.MULTILINE)
        if exports and not path.with_suffix(".h").exists():
            missing.append(str(path.relative_to(ROOT)))
    assert not missing, missing


def quoted_includes(path):
    """The files a C file's `#include "..."` lines name, resolved against its directory and csrc/."""
    out = []
    for name in re.findall(r'^\s*#\s*include\s*"([^"]+)"', path.read_text(), re.MULTILINE):
        local = (path.parent / name).resolve()
        out.append(local if local.exists() else (CSRC / name).resolve())
    return out


def test_the_include_reader_finds_known_includes():
    found = quoted_includes(CSRC / "pd_backward.c")
    assert (CSRC / "pd_backward.h").resolve() in found
    assert (CSRC / "kernels" / "gemm.h").resolve() in found


def test_the_kernels_include_no_core_header():
    allowed = ((CSRC / "kernels").resolve(), (CSRC / "platform").resolve())
    bad = []
    for path in sorted((CSRC / "kernels").rglob("*.[ch]")):
        for header in quoted_includes(path):
            if not any(header.is_relative_to(root) for root in allowed):
                bad.append(f"{path.relative_to(ROOT)} includes {header.relative_to(ROOT.resolve())}")
    assert not bad, bad


FORWARD_FILES = ("pd_decoder.h", "pd_model.h", "pd_model.c", "pd_graph.h", "pd_graph.c", "pd_forward.h",
                 "pd_forward.c")


def test_the_decoder_does_not_include_the_backward_header():
    for name in FORWARD_FILES:
        assert (CSRC / "pd_backward.h").resolve() not in quoted_includes(CSRC / name), name


def declared_functions(path):
    """Names of the pd_ functions a C header declares (prototypes, not inline definitions)."""
    return set(re.findall(r"\b(pd_\w+)\s*\([^;{}()]*(?:\([^()]*\)[^;{}()]*)*\)\s*;", _code(path)))


def test_the_declaration_reader_finds_known_prototypes():
    assert {"pd_atfork", "pd_mutex_lock", "pd_thread_spawn"} <= declared_functions(CSRC / "platform" / "pd_thread.h")


def test_the_platform_includes_and_declares_only_the_platform():
    platform = (CSRC / "platform").resolve()
    defined = {name for path in platform.glob("*.c") for name, _, _ in functions(path)}
    bad = [
        f"{path.name} includes {header.relative_to(ROOT.resolve())}"
        for path in sorted(platform.glob("*.[ch]"))
        for header in quoted_includes(path)
        if not header.is_relative_to(platform)
    ]
    bad += [
        f"{path.name} declares {name}, defined outside the platform"
        for path in sorted(platform.glob("*.h"))
        for name in sorted(declared_functions(path) - defined)
    ]
    assert not bad, bad


BLOCK_COUNT = re.compile(r"\b9\s*\*|\*\s*9\b|[%/]\s*9\b|\[9\]")


def test_no_literal_count_of_a_block_s_tensors_remains():
    """The parameter layout is pd_params.h's tables: no `9 * b`, `% 9` or `[9]` stands for it."""
    found = [
        f"{path.relative_to(ROOT)}:{_code(path).count(chr(10), 0, m.start()) + 1}"
        for path in sorted(CSRC.rglob("*.[ch]"))
        if not {"kernels", "libm"} & set(path.relative_to(CSRC).parts)
        for m in BLOCK_COUNT.finditer(_code(path))
    ]
    assert not found, found


FIGURE = re.compile(
    r"\bissue[- ]?\d+|(?<![\w&])#\d+\b|\b\d+(?:\.\d+)?\s*(?:us|µs|ms|ns|GFLOP/s|GF/s)\b"
    r"|\b\d+(?:\.\d+)?\s*->\s*\d+(?:\.\d+)?\b|\b\d+\s*%\s*(?:faster|slower)",
    re.IGNORECASE,
)


def comment_figures(path):
    """(line, text) of each issue number or benchmark figure in a C file's comments."""
    text = path.read_text()
    out = []
    for m in re.finditer(r"/\*.*?\*/|//[^\n]*", text, re.DOTALL):
        for hit in FIGURE.finditer(m.group(0)):
            out.append((text.count("\n", 0, m.start() + hit.start()) + 1, hit.group(0)))
    return out


def test_the_figure_finder_finds_issue_numbers_and_timings(tmp_path):
    sample = tmp_path / "sample.c"
    sample.write_text("/* see issue 17 */\nint x; // 45.7 -> 44.4 us\n/* 105 GFLOP/s */ int y = 3 % 2;\n")
    assert [line for line, _ in comment_figures(sample)] == [1, 2, 3]


def test_c_comments_hold_no_issue_numbers_or_benchmark_figures():
    found = [
        f"{path.relative_to(ROOT)}:{line} {hit!r}"
        for path in sorted(CSRC.rglob("*.[ch]"))
        for line, hit in comment_figures(path)
    ]
    assert not found, f"move these to benchmarks/README.md or benchmarks/KERNELS.md: {found}"


MAX_PARAMS = 9
# the BLAS-shaped products keep BLAS's argument order (the _sum ones add B's checksum slot);
# pd_graph_forward is the Cython skin's entry
WIDE_BY_DESIGN = {"pd_mm_nn", "pd_mm_nt", "pd_mm_tn", "pd_mm_nn_sum", "pd_mm_nt_sum", "pd_graph_forward"}


def parameter_counts(path):
    """(name, number of parameters) of every function defined in a C file."""
    code = re.sub(r"PD_TARGET\s*\([^)]*\)", "", _code(path))
    out = []
    for m in re.finditer(r"\b(\w+)\s*\(([^;{}()]*)\)\s*\{", code):
        if m.group(1) in {"if", "for", "while", "switch"}:
            continue
        params = [p for p in m.group(2).split(",") if p.strip() and p.strip() != "void"]
        out.append((m.group(1), len(params)))
    return out


def test_the_parameter_counter_counts_known_functions():
    counts = dict(parameter_counts(CSRC / "pd_backward.c"))
    assert counts["pd_graph_backward_pass"] == 8
    assert counts["capture"] == 5


def test_no_c_function_takes_a_long_list_of_loose_arguments():
    wide = [
        f"{path.relative_to(ROOT)} {name} ({n} parameters)"
        for path in sorted(CSRC.rglob("*.c"))
        for name, n in parameter_counts(path)
        if n > MAX_PARAMS and name not in WIDE_BY_DESIGN
    ]
    assert not wide, f"pass the context struct instead: {wide}"
