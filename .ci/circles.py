#!/usr/bin/env python3
"""Import circles between the modules of Rust crates.

A module *imports* another when it names one of its items through a path (`use crate::a::b::X`,
`crate::a::f(...)`, `super::g`, a `pub use` it re-exports): the edge goes to the module that
defines the item, re-exports followed (`crate::Error` re-exported by `lib.rs` from `error.rs` is an
edge to `error.rs`). A module's use of its own descendants is structure, not an edge (`mod.rs`
calling into its children); everything else counts. A circle is a set of modules that import each
other in a loop (a strongly connected component of two or more). Tests (`#[cfg(test)] mod ...`)
and comments are not read.

    python3 .ci/circles.py runtime/src formats/src compiler/src

prints each circle with the names that tie it and exits 1 if there is one; with no argument it
reads every `src/` folder of the workspace's crates. Standard library only.
"""

import re
import subprocess
import sys
from pathlib import Path

ITEM = re.compile(
    r"\b(?:fn|struct|enum|trait|const|static|type|union|mod|macro_rules!)\s+(?:r#)?([A-Za-z_]\w*)"
)


def strip(text):
    """The code of `text` without comments, string and char literals, and test modules."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            i = text.find("\n", i)
            i = n if i < 0 else i
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == '"' or (c == "r" and re.match(r'r#*"', text[i:i + 8]) and not text[i - 1:i].isalnum()):
            m = re.match(r'r(#*)"', text[i:])
            if m:
                end = text.find('"' + m.group(1), i + len(m.group(0)))
                i = n if end < 0 else end + 1 + len(m.group(1))
            else:
                i += 1
                while i < n and text[i] != '"':
                    i += 2 if text[i] == "\\" else 1
                i += 1
            out.append('""')
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:i + 12]) or (
            c == "'" and re.match(r"'\\u\{[0-9a-fA-F]+\}'", text[i:i + 12])
        ):
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", text[i:])
            i += len(m.group(0))
        else:
            out.append(c)
            i += 1
    code = "".join(out)
    # Test modules: `#[cfg(test)] mod name { ... }` up to the matching brace.
    while True:
        m = re.search(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{", code)
        if not m:
            return code
        depth, j = 1, m.end()
        while j < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[j], 0)
            j += 1
        code = code[: m.start()] + code[j:]


def expand(tree, prefix=()):
    """The paths of a `use` tree: `a::{b, c::d as e}` -> [(a, b), (a, c, d)] with their names."""
    tree = tree.strip()
    depth, parts, start = 0, [], 0
    if tree.endswith("}") and "{" in tree:
        head = tree[: tree.index("{")].rstrip(":").strip()
        body = tree[tree.index("{") + 1 : -1]
        base = prefix + tuple(s for s in head.split("::") if s)
        for k, ch in enumerate(body):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                parts.append(body[start:k])
                start = k + 1
        parts.append(body[start:])
        return [p for part in parts if part.strip() for p in expand(part, base)]
    path = tree.split(" as ")[0].strip()
    segments = prefix + tuple(s for s in path.split("::") if s)
    return [segments]


class Crate:
    """The modules of one crate root (`lib.rs` or `main.rs`) and what each imports."""

    def __init__(self, root_file):
        self.root = root_file.parent
        self.files = {}  # module path (tuple) -> file
        self.paths = {}  # file -> module path
        self.code = {}
        self.collect(root_file, ())

    def collect(self, file, module):
        self.files[module] = file
        self.paths[file] = module
        code = strip(file.read_text(encoding="utf-8"))
        self.code[file] = code
        folder = file.parent if file.name in ("lib.rs", "main.rs", "mod.rs") else file.with_suffix("")
        for m in re.finditer(r"(?:#\[path\s*=\s*\"[^\"]*\"\]\s*)?\bmod\s+(\w+)\s*;", code):
            name = m.group(1)
            for child in (folder / f"{name}.rs", folder / name / "mod.rs"):
                if child.exists():
                    self.collect(child, module + (name,))
                    break

    def absolute(self, module, segments):
        """`segments` as read in `module`, from the crate root (None if another crate's)."""
        first = segments[0]
        if first in ("crate", "$crate"):
            return segments[1:]
        if first == "self":
            return module + segments[1:]
        if first == "super":
            up = module
            while segments and segments[0] == "super":
                up, segments = up[:-1], segments[1:]
            return up + segments
        if module + (first,) in self.files:  # a child module named relatively
            return module + segments
        return None

    def reexports(self, module):
        """`name -> absolute path` of what `module` re-exports (`pub use`)."""
        code = self.code[self.files[module]]
        found = {}
        for m in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", code):
            tree = m.group(1)
            for path in expand(tree):
                absolute = self.absolute(module, path)
                if absolute is None or path[-1] in ("*", "self"):
                    continue
                alias = re.search(r"\b" + re.escape(path[-1]) + r"\s+as\s+(\w+)", tree)
                found[alias.group(1) if alias else path[-1]] = absolute
        return found

    def resolve(self, segments, depth=0):
        """The file that defines the item `segments` names (a path from the crate root)."""
        module = ()
        rest = list(segments)
        while rest and module + (rest[0],) in self.files:
            module += (rest.pop(0),)
        if rest and depth < 16:
            target = self.reexports(module).get(rest[0])
            if target is not None and tuple(target) != tuple(module) + tuple(rest[:1]):
                return self.resolve(tuple(target) + tuple(rest[1:]), depth + 1)
        return self.files[module]

    def edges(self):
        """`(from, to) -> names` for every import across modules (descendants excluded)."""
        edges = {}
        for file, code in self.code.items():
            module = self.paths[file]
            paths = []
            for m in re.finditer(r"\buse\s+([^;]+);", code):
                paths += expand(m.group(1))
            without_use = re.sub(r"\buse\s+[^;]+;", "", code)
            for m in re.finditer(r"(?<![\w:])((?:\$?crate|super|self)(?:::\w+)+)", without_use):
                paths.append(tuple(m.group(1).split("::")))
            for path in paths:
                absolute = self.absolute(module, path)
                if absolute is None:
                    continue
                absolute = tuple(s for s in absolute if s not in ("*", "self"))
                target = self.resolve(absolute)
                target_module = self.paths[target]
                if target == file or target_module[: len(module)] == module:
                    continue
                prefix = 0
                while prefix < len(absolute) and absolute[: prefix + 1] in self.files:
                    prefix += 1
                name = absolute[prefix] if prefix < len(absolute) else "*"
                edges.setdefault((file, target), set()).add(name)
        return edges


def circles(edges):
    """Strongly connected components of two or more nodes (Tarjan)."""
    graph = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def roots(folders):
    """Every crate root (`lib.rs`, `main.rs`, `src/bin/*.rs`) under `folders`."""
    found = []
    for folder in folders:
        folder = Path(folder)
        for name in ("lib.rs", "main.rs"):
            found += sorted(folder.rglob(name))
        bins = folder / "bin"
        if bins.is_dir():
            found += sorted(p for p in bins.glob("*.rs"))
    return found


def main(argv):
    folders = argv[1:]
    if not folders:
        listed = subprocess.run(
            ["git", "ls-files", "*Cargo.toml"], capture_output=True, text=True, check=True
        ).stdout.split()
        folders = [str(Path(p).parent / "src") for p in listed if (Path(p).parent / "src").is_dir()]
    total, modules = 0, 0
    seen = set()
    for root in roots(folders):
        if root in seen:
            continue
        crate = Crate(root)
        seen.update(crate.files.values())
        modules += len(crate.files)
        edges = crate.edges()
        for component in circles(edges):
            total += 1
            print(f"circle {total}: {len(component)} modules: " + ", ".join(map(str, component)))
            for a in component:
                for b in component:
                    if (a, b) in edges:
                        print(f"  {a} -> {b}: {', '.join(sorted(edges[(a, b)]))}")
    print(f"{modules} modules in {', '.join(folders)}: {total} circle(s)")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
