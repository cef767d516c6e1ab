#!/usr/bin/env python3
"""Assemble every tests/data PTX file with `ptxas -arch=sm_XX -v FILE -o /dev/null`
and print a Markdown table of what ptxas reports per function (registers for
entries; stack frame and spill bytes for every function). Exits non-zero if
ptxas rejects a file. Usage: python3 tests/data/ptxas_table.py [FILES...]"""
import glob
import os
import re
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
files = sys.argv[1:] or sorted(glob.glob(os.path.join(here, "*.ptx")) +
                               glob.glob(os.path.join(here, "hand", "*.ptx")))
failed = False
print("| file | function | kind | regs | stack | spill st/ld |")
print("|---|---|---|---|---|---|")
for path in files:
    text = open(path).read()
    arch = re.search(r"^\s*\.target\s+(sm_\d+a?)", text, re.M).group(1)
    res = subprocess.run(["ptxas", f"-arch={arch}", "-v", path, "-o", "/dev/null"],
                         capture_output=True, text=True)
    rel = os.path.relpath(path, here)
    if res.returncode != 0:
        failed = True
        print(f"| {rel} | ptxas FAILED: {res.stderr.strip().splitlines()[0]} | | | | |")
        continue
    entries = set(re.findall(r"Compiling entry function '([^']+)'", res.stderr))
    rows = {}
    cur = None
    for line in res.stderr.splitlines():
        m = re.search(r"Function properties for (\S+)", line)
        if m:
            cur = m.group(1)
            rows.setdefault(cur, ["", "", ""])
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and cur:
            rows[cur][1] = m.group(1)
            rows[cur][2] = f"{m.group(2)}/{m.group(3)}"
            continue
        m = re.search(r"Used (\d+) registers", line)
        if m and cur:
            rows[cur][0] = m.group(1)
    for name, (regs, stack, spill) in rows.items():
        kind = "entry" if name in entries else "func"
        print(f"| {rel} | `{name}` | {kind} | {regs or '-'} | {stack} | {spill} |")
sys.exit(1 if failed else 0)
