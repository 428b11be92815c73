#!/usr/bin/env python3
"""Checks the links of the documentation in a spintune source tree.

Usage: check_doc_links.py [--self-test] SOURCE_DIR

In every Markdown file of the tree (README.md, docs/, storage/SCHEMA.md, ...;
build directories and hidden ones left out):
  - a link [text](target) or ![alt](target) to a file or folder of the tree
    must name one that exists, and its #anchor a heading of the target (as
    GitHub spells heading anchors: lower case, punctuation dropped, spaces
    as hyphens, -1, -2, ... for repeats); URLs (scheme:) are not checked;
  - a path such as `docs/traces.md` written in the text must exist;
  - a section quoted after a page, as in (`docs/benchmarks.md`, "Fleets on
    SQLite") or [benchmarks.md](benchmarks.md), "Fleets on SQLite", must be
    a heading of that page.
In source files (C, C++, shell, CMake), only the paths of Markdown files
they name are checked (section names quoted in code comments are not).
Links and paths inside fenced code blocks and `code spans` of Markdown
files are not links, except that a path in a code span is checked.

Prints one line per problem (FILE:LINE: what) and exits 1 if there is any.
--self-test first checks a small tree with known problems and fails unless
exactly those are reported (so a checker that finds nothing cannot pass).
"""
import os
import re
import sys
import tempfile

SKIP_DIRS = {'.git', 'node_modules'}
SOURCE_EXTS = ('.h', '.cc', '.c', '.sh', '.cmake', '.txt', '.proto', '.py')
MD_PATH = re.compile(
    r'(?<![\w/.<-])((?:docs|storage|driver|tools|bench|agent|tuner|cli|models|policy|tests)'
    r'/[\w./-]*\w\.md)\b')
LINK = re.compile(r'!?\[([^\]]*)\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)')
# A page, then a quoted section name: `docs/x.md`, "Name" or [x.md](x.md), "Name".
QUOTED = re.compile(
    r'(?:`((?:[\w.-]+/)*[\w.-]+\.md)`|\]\(((?:[\w.-]+/)*[\w.-]+\.md)\))'
    r'\)?,?\s*\(?"([^"]+)"')


def walk(root):
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS and not x.startswith('.')
                         and not x.startswith('build'))
        for f in sorted(files):
            yield os.path.join(d, f)


def slug(text):
    text = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', text)  # a link keeps its text
    text = text.strip().lower()
    text = re.sub(r'[^\w\- ]', '', text)
    return text.replace(' ', '-')


def strip_code(lines):
    """The lines with fenced blocks blanked (and a flag per line: in a fence)."""
    out, fence = [], None
    for line in lines:
        m = re.match(r'\s*(```+|~~~+)', line)
        if m and (fence is None or m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence)):
            fence = m.group(1) if fence is None else None
            out.append('')
            continue
        out.append('' if fence else line)
    return out


_headings = {}


def headings(path):
    """(anchors, names) of the headings of a Markdown file."""
    if path not in _headings:
        anchors, names, seen = set(), [], {}
        with open(path, encoding='utf-8', errors='replace') as f:
            lines = strip_code(f.read().split('\n'))
        for line in lines:
            m = re.match(r'#{1,6}\s+(.*?)\s*#*\s*$', line)
            if not m:
                continue
            name = m.group(1)
            s = slug(name)
            n = seen.get(s, 0)
            seen[s] = n + 1
            anchors.add(s if n == 0 else f'{s}-{n}')
            names.append(re.sub(r'[`*]', '', name))
        _headings[path] = (anchors, names)
    return _headings[path]


def resolve(root, here, path):
    """The file a path names: relative to the file, else to the tree's root."""
    for base in (os.path.dirname(here), root):
        target = os.path.normpath(os.path.join(base, path))
        if os.path.exists(target):
            return target
    return None


def check_markdown(root, path, problems):
    with open(path, encoding='utf-8', errors='replace') as f:
        raw = f.read().split('\n')
    lines = strip_code(raw)
    rel = os.path.relpath(path, root)
    for no, line in enumerate(lines, 1):
        if not line:
            continue
        prose = re.sub(r'`[^`]*`', lambda m: ' ' * len(m.group(0)), line)
        for m in LINK.finditer(prose):
            target = m.group(2)
            if re.match(r'[a-zA-Z][a-zA-Z0-9+.-]*:', target):
                continue  # https:, mailto:
            file_part, _, anchor = target.partition('#')
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) \
                if file_part else path
            if not os.path.exists(dest):
                problems.append(f'{rel}:{no}: link to a missing file: {target}')
                continue
            if anchor and dest.endswith('.md') and anchor not in headings(dest)[0]:
                problems.append(f'{rel}:{no}: {os.path.relpath(dest, root)} has no heading '
                                f'for the anchor #{anchor}')
        for m in MD_PATH.finditer(line):
            if not resolve(root, path, m.group(1)):
                problems.append(f'{rel}:{no}: names a missing file: {m.group(1)}')
    # Quoted section names may wrap: look at the text as one line per paragraph.
    text = '\n'.join(lines)
    for para_start, para in paragraphs(text):
        flat = re.sub(r'\s+', ' ', para)
        for m in QUOTED.finditer(flat):
            page, name = m.group(1) or m.group(2), m.group(3)
            if '(' in name or ')' in name:
                continue
            dest = resolve(root, path, page)
            if not dest:
                continue  # reported above as a missing file or link
            names = headings(dest)[1]
            if not any(h == name or h.startswith(name) for h in names):
                problems.append(f'{rel}:{para_start}: {os.path.relpath(dest, root)} has no '
                                f'section "{name}"')


def paragraphs(text):
    start, buf = 1, []
    for no, line in enumerate(text.split('\n'), 1):
        if line.strip():
            if not buf:
                start = no
            buf.append(line)
        elif buf:
            yield start, ' '.join(buf)
            buf = []
    if buf:
        yield start, ' '.join(buf)


def check_source(root, path, problems):
    with open(path, encoding='utf-8', errors='replace') as f:
        lines = f.read().split('\n')
    rel = os.path.relpath(path, root)
    for no, line in enumerate(lines, 1):
        for m in MD_PATH.finditer(line):
            if not resolve(root, path, m.group(1)):
                problems.append(f'{rel}:{no}: names a missing file: {m.group(1)}')


def check_tree(root):
    """(problems, Markdown files checked) of the tree at `root`."""
    problems, pages = [], 0
    for path in walk(root):
        if path.endswith('.md'):
            pages += 1
            check_markdown(root, path, problems)
        elif path.endswith(SOURCE_EXTS) and os.path.basename(path) != 'check_doc_links.py':
            check_source(root, path, problems)
    return problems, pages


# The self-test's tree: file -> text, and the problems it must report.
SELF_TEST_TREE = {
    'README.md': '# T\n\nSee [a](docs/a.md#second-part), [b](docs/b.md), `docs/a.md`.\n',
    'docs/a.md': '# A page\n\n## Second part\n\n## Second part\n\n```\n# not a heading\n```\n',
    'docs/b.md': ('# B\n\n[ok](a.md#second-part-1) [gone](c.md) [no anchor](a.md#third)\n'
                  '[code link](`x.md`) `[in code](c.md)` and `docs/missing.md`\n\n'
                  'As (`docs/a.md`, "Second part") says; not (`docs/a.md`,\n"Fourth part").\n\n'
                  '```\n[fenced](c.md)\n```\n'),
    'tools/x.sh': '# docs/a.md, "No such section" (a comment: not checked); docs/gone.md\n',
}
SELF_TEST_PROBLEMS = [
    'docs/b.md:3: link to a missing file: c.md',
    'docs/b.md:3: docs/a.md has no heading for the anchor #third',
    'docs/b.md:4: names a missing file: docs/missing.md',
    'docs/b.md:6: docs/a.md has no section "Fourth part"',
    'tools/x.sh:1: names a missing file: docs/gone.md',
]


def self_test():
    with tempfile.TemporaryDirectory() as root:
        for name, text in SELF_TEST_TREE.items():
            os.makedirs(os.path.join(root, os.path.dirname(name)), exist_ok=True)
            with open(os.path.join(root, name), 'w', encoding='utf-8') as f:
                f.write(text)
        _headings.clear()
        problems, _ = check_tree(root)
        _headings.clear()
    if sorted(problems) != sorted(SELF_TEST_PROBLEMS):
        print('check_doc_links: self-test failed; reported:', file=sys.stderr)
        for p in problems:
            print('  ' + p, file=sys.stderr)
        print('expected:', file=sys.stderr)
        for p in SELF_TEST_PROBLEMS:
            print('  ' + p, file=sys.stderr)
        return False
    print(f'self-test: the {len(SELF_TEST_PROBLEMS)} planted problems found, nothing else')
    return True


def main(argv):
    args = argv[1:]
    if args and args[0] in ('-h', '--help'):
        print(__doc__.strip())
        return 0
    run_self_test = bool(args) and args[0] == '--self-test'
    if run_self_test:
        args = args[1:]
    if len(args) != 1:
        print('usage: check_doc_links.py [--self-test] SOURCE_DIR', file=sys.stderr)
        return 2
    root = os.path.abspath(args[0])
    if not os.path.isfile(os.path.join(root, 'README.md')):
        print(f'check_doc_links: {args[0]}: no README.md (not a spintune source tree)',
              file=sys.stderr)
        return 2
    if run_self_test and not self_test():
        return 1
    problems, pages = check_tree(root)
    for p in problems:
        print(p)
    print(f'{pages} Markdown files checked, {len(problems)} problems')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
