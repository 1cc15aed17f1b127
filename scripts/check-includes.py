#!/usr/bin/env python3
"""Include-what-you-use for the standard library, in seconds: every tracked C++ file that names
std::find includes <algorithm>, std::string_view <string_view>, and so on (the table below), rather
than getting them through another header. libstdc++ trims its own includes between releases (GCC
12's <string> brought <algorithm>, GCC 14's does not), so a file that leans on a neighbour builds
on one Debian release and not the next; this check fails on the first such file in every run,
whatever the compiler. A .cc may rely on what its own header (same name, .h) includes.

The project's own headers are kept by the builds themselves (a missing one never compiles).
Usage: scripts/check-includes.py [--fix] [FILE...]   (default: every *.cc and *.h git tracks,
       or without git every one outside build*/)
--fix adds the missing includes, each into the file's block of standard headers, in order.
Exit 0 when clean, 1 with one line per finding (file:line: name without <header>).
"""
import os
import re
import subprocess
import sys

# header -> the names whose use requires it. Only names one header owns are listed (std::hash,
# std::abs, std::remove, std::size_t in its many homes are left out: no false alarms).
TABLE = {
    "algorithm": r"(?:ranges::)?(?:find|find_if|find_if_not|count|count_if|sort|stable_sort|min|"
                 r"max|minmax|min_element|max_element|any_of|all_of|none_of|transform|copy_if|"
                 r"fill|remove_if|unique|reverse|lower_bound|upper_bound|equal_range|"
                 r"binary_search|clamp|rotate|replace_if|partial_sort|nth_element|set_union|"
                 r"set_intersection|set_difference|mismatch|for_each|is_sorted|next_permutation|"
                 r"prev_permutation|shuffle|stable_partition|lexicographical_compare|"
                 r"adjacent_find)",
    "numeric": r"(?:accumulate|iota|reduce|inner_product|partial_sum|gcd|lcm|transform_reduce|"
               r"exclusive_scan|inclusive_scan|adjacent_difference)",
    "memory": r"(?:unique_ptr|make_unique|shared_ptr|make_shared|weak_ptr)",
    "optional": r"(?:optional|nullopt)",
    "string_view": r"string_view",
    "string": r"(?:string|to_string|stoi|stol|stoul|stoull|stod|getline)",
    "vector": r"vector",
    "map": r"(?:map|multimap)",
    "set": r"(?:set|multiset)",
    "unordered_map": r"unordered_map",
    "unordered_set": r"unordered_set",
    "sstream": r"(?:ostringstream|istringstream|stringstream)",
    "fstream": r"(?:ofstream|ifstream|fstream)",
    "iostream": r"(?:cout|cerr|cin|clog)",
    "functional": r"(?:function|less|greater|invoke)",
    "array": r"array",
    "tuple": r"(?:tuple|make_tuple|tie)",
    "variant": r"(?:variant|visit|holds_alternative|monostate)",
    "filesystem": r"filesystem",
    "stdexcept": r"(?:runtime_error|logic_error|invalid_argument|out_of_range|range_error|"
                 r"overflow_error|length_error|domain_error)",
    "limits": r"numeric_limits",
    "cmath": r"(?:sqrt|pow|log|log2|log10|exp|floor|ceil|round|lround|llround|fabs|isnan|isinf|"
             r"isfinite|nextafter|fmod|trunc|hypot)(?=\()",
    "cstring": r"(?:memcpy|memset|memcmp|strlen|strcmp|strncmp|strerror|strchr|strstr|memmove)",
    "cstdlib": r"(?:getenv|system|exit|abort|malloc|free|strtol|strtoul|strtod|strtoull|atoi|"
               r"setenv|unsetenv|qsort)",
    "cstdio": r"(?:printf|fprintf|snprintf|fopen|fclose|FILE|fputs|fwrite|fread|fflush|perror|"
              r"sscanf|puts|fgets)",
    "chrono": r"chrono",
    "thread": r"(?:thread|this_thread)",
    "mutex": r"(?:mutex|lock_guard|unique_lock|scoped_lock|call_once|once_flag)",
    "atomic": r"atomic",
    "utility": r"(?:pair|make_pair|move|forward|swap|exchange|declval|as_const|index_sequence|"
               r"make_index_sequence)",
    "cstdint": r"u?int(?:8|16|32|64)_t",
    "iterator": r"(?:back_inserter|front_inserter|inserter|istreambuf_iterator|"
                r"ostreambuf_iterator|istream_iterator|ostream_iterator|distance|next|prev|advance|"
                r"make_move_iterator)",
    "span": r"span",
    "deque": r"deque",
    "list": r"list",
    "queue": r"(?:queue|priority_queue)",
    "random": r"(?:mt19937|mt19937_64|uniform_int_distribution|uniform_real_distribution|"
              r"random_device|normal_distribution|discrete_distribution|bernoulli_distribution|"
              r"minstd_rand)",
    "bitset": r"bitset",
    "regex": r"(?:regex|smatch|regex_search|regex_match|regex_replace|cmatch)",
    "charconv": r"(?:from_chars|to_chars|chars_format)",
    "system_error": r"(?:error_code|system_error|errc|generic_category|system_category)",
    "exception": r"(?:exception|exception_ptr|current_exception|rethrow_exception|terminate)",
    "iomanip": r"(?:setw|setprecision|setfill|quoted|put_time)",
    "numbers": r"numbers",
    "bit": r"(?:popcount|countl_zero|countr_zero|bit_width|bit_ceil|bit_floor|has_single_bit|"
           r"bit_cast|rotl|rotr)",
}
# Headers the standard says also provide a header's names.
ALSO = {
    "ostream": ["iostream", "sstream", "fstream"],
    "exception": ["stdexcept"],
}
PATTERNS = {h: re.compile(r"\bstd::" + names + r"\b(?!_)") for h, names in TABLE.items()}
INCLUDE = re.compile(r'^\s*#\s*include\s*<([^>]+)>', re.M)


def strip(src):
    """Comments and string literals out, newlines kept (line numbers stay right)."""
    def blank(m):
        return re.sub(r"[^\n]", " ", m.group(0))
    return re.sub(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])\'', blank, src,
                  flags=re.S)


def own_header(path, headers):
    """A .cc's own header: the tracked .h of the same name (src/foo.cc -> include/.../foo.h)."""
    if not path.endswith(".cc"):
        return []
    return headers.get(os.path.basename(path)[:-3], [])


def findings(path, headers):
    with open(path, encoding="utf-8", errors="replace") as f:
        src = f.read()
    have = set(INCLUDE.findall(src))
    for h in own_header(path, headers):
        with open(h, encoding="utf-8", errors="replace") as f:
            have |= set(INCLUDE.findall(f.read()))
    body = strip(src)
    out = []
    for header, pat in PATTERNS.items():
        if header in have or any(a in have for a in ALSO.get(header, [])):
            continue
        m = pat.search(body)
        if m:
            out.append((body.count("\n", 0, m.start()) + 1, m.group(0), header))
    return out


def is_std_header(name):
    return "/" not in name and "." not in name


def fix(path, wanted):
    """Adds #include <h> for each h, into the file's run of standard headers, sorted."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    idx = [i for i, l in enumerate(lines)
           if (m := INCLUDE.match(l)) and is_std_header(m.group(1))]
    if idx:
        # The first contiguous run of standard includes.
        start = end = idx[0]
        while end + 1 < len(lines) and (m := INCLUDE.match(lines[end + 1])) and \
                is_std_header(m.group(1)):
            end += 1
        block = sorted(set(lines[start:end + 1]) | {f"#include <{h}>" for h in wanted})
        lines[start:end + 1] = block
    else:
        # No standard include yet: a block of its own after the last <...> include (a library's),
        # else before the first include, else after #pragma once, set off by a blank line.
        angle = [i for i, l in enumerate(lines) if INCLUDE.match(l)]
        at = next((i for i, l in enumerate(lines) if re.match(r'\s*#\s*include\s*"', l)), None)
        if angle:
            lines[angle[-1] + 1:angle[-1] + 1] = [""] + [f"#include <{h}>" for h in sorted(wanted)]
        elif at is None:
            at = next(i for i, l in enumerate(lines) if l.startswith("#pragma once")) + 1
            lines[at:at] = [""] + [f"#include <{h}>" for h in sorted(wanted)]
        else:
            lines[at:at] = [f"#include <{h}>" for h in sorted(wanted)] + [""]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


def walk_tree():
    """No git (a bare build root, a source tarball): the tree's files minus build outputs."""
    out = []
    for d, dirs, names in os.walk("."):
        if d == ".":
            dirs[:] = [x for x in dirs if not x.startswith((".", "build", "_build"))]
        out += [os.path.relpath(os.path.join(d, f)) for f in names if f.endswith((".cc", ".h"))]
    return sorted(out)


def main(argv):
    do_fix = "--fix" in argv
    files = [os.path.abspath(a) for a in argv if a != "--fix"]
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    try:
        tracked = subprocess.run(["git", "ls-files", "*.cc", "*.h"], capture_output=True,
                                 text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        tracked = walk_tree()
    headers = {}
    for h in tracked:
        if h.endswith(".h"):
            headers.setdefault(os.path.basename(h)[:-2], []).append(h)
    bad = 0
    for path in files or tracked:
        found = findings(path, headers)
        for line, name, header in found:
            print(f"{path}:{line}: {name} without <{header}>")
        bad += len(found)
        if do_fix and found:
            fix(path, {h for _, _, h in found})
    if bad:
        print(f"topo-aware: check-includes: {bad} standard names used without their header"
              + ("" if do_fix else " (scripts/check-includes.py --fix adds them)"),
              file=sys.stderr)
    return 1 if bad and not do_fix else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
