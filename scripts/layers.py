#!/usr/bin/python3
"""core's folders (and gateway/gw) as layers: which folder includes which,
checked to have no cycle and to follow the Makefile's LIB_ORDER (a library
before every library it uses, the order a static link needs). Prints the
graph; exits 1 naming an include that breaks either rule. Then the same
for modules (x.c with x.h and x_internal.h) in every program and library:
no two modules include each other, directly or around a loop.

    python3 scripts/layers.py [--dot]"""
import collections
import glob
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.chdir(REPO)
files = [f for f in subprocess.check_output(
    ['git', 'ls-files', 'core', 'gateway/gw']).decode().split()
    if f.endswith(('.c', '.h')) and os.path.exists(f)]


def folder(path):
    if path.startswith('gateway/gw/'):
        return 'gw'
    parts = path.split('/')
    return parts[1] if len(parts) > 2 else 'root'


def target(h):
    for base in ('core', 'gateway'):
        if os.path.exists(os.path.join(base, h)):
            return os.path.join(base, h)
    return None


inc = re.compile(r'#\s*include\s+"([^"]+)"')
edges, why = collections.defaultdict(set), {}
for f in files:
    for line in open(f):
        m = inc.match(line)
        t = m and target(m.group(1))
        if t and folder(t) != folder(f):
            a, b = folder(f), folder(t)
            edges[a].add(b)
            why.setdefault((a, b), f'{f} includes "{m.group(1)}"')

make = open('Makefile').read()
order = re.search(r'^LIB_ORDER\s*:=((?:.*\\\n)*.*)$', make, re.M).group(1)
order = order.replace('\\\n', ' ').split()
rank = {name: i for i, name in enumerate(order)}

if '--dot' in sys.argv:
    print('digraph core {')
    for a in sorted(edges):
        for b in sorted(edges[a]):
            print(f'  "{a}" -> "{b}";')
    print('}')
    sys.exit(0)



def module_loops():
    """Cycles of the module include graph, each as a list of modules."""
    srcs = [f for f in subprocess.check_output(['git', 'ls-files']).decode()
            .split() if f.endswith(('.c', '.h')) and os.path.exists(f)
            and not f.startswith(('tests/', 'bench/'))]
    known = set(srcs)

    def module(path):
        m = os.path.splitext(path)[0]
        return m[:-len('_internal')] if m.endswith('_internal') else m
    graph = collections.defaultdict(set)
    for f in srcs:
        for line in open(f, errors='replace'):
            m = inc.match(line)
            if not m:
                continue
            for base in (os.path.dirname(f), 'core', 'gateway'):
                t = os.path.normpath(os.path.join(base, m.group(1)))
                if t in known:
                    if module(t) != module(f):
                        graph[module(f)].add(module(t))
                    break
    # Tarjan's strongly connected components, iteratively.
    index, low, stack, on, loops, n = {}, {}, [], set(), [], [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = n[0]
        n[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = n[0]
                    n[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    loops.append(sorted(comp))
    return loops


def handler_calls():
    """(caller file, callee, its file) of every call between handlers."""
    handlers = sorted(glob.glob('fcgi/api_*.c'))
    text = {f: open(f).read() for f in handlers}
    defined = {}
    for f in handlers:
        for m in re.finditer(r'^(?!static)[a-z][^\n;]*?\b(\w+)\(', text[f],
                             re.M):
            defined.setdefault(m.group(1), f)
    calls = []
    for f in handlers:
        for name, home in sorted(defined.items()):
            if home != f and re.search(r'\b%s\s*\(' % name, text[f]):
                calls.append((f, name, home))
    return calls


bad = 0
for caller, name, home in handler_calls():
    print(f'layers: {caller} calls {name} of {home} (a handler calls no'
          ' other handler: move the shared part into core or fcgi)',
          file=sys.stderr)
    bad = 1
for loop in module_loops():
    print(f'layers: modules include each other: {" ".join(loop)}',
          file=sys.stderr)
    bad = 1
for a in sorted(edges):
    print(f'{a:9} -> {" ".join(sorted(edges[a]))}')
for a in sorted(edges):
    for b in sorted(edges[a]):
        if a in rank and b in rank and rank[a] >= rank[b]:
            print(f'layers: {a} uses {b} but comes after it in LIB_ORDER'
                  f' ({why[(a, b)]})', file=sys.stderr)
            bad = 1
        elif a != 'root' and b != 'root' and (a not in rank or b not in rank):
            print(f'layers: {a if a not in rank else b} is not in LIB_ORDER',
                  file=sys.stderr)
            bad = 1
sys.exit(bad)
