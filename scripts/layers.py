#!/usr/bin/python3
"""core's folders (and gateway/gw) as layers: which folder includes which,
checked to have no cycle and to follow the Makefile's LIB_ORDER (a library
before every library it uses, the order a static link needs). Prints the
graph; exits 1 naming an include that breaks either rule.

    python3 scripts/layers.py [--dot]"""
import collections
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

bad = 0
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
