"""A record for a run folder that no command of bench/ wrote one for: a past run's, or `make bench`'s (the grader
package, which writes those, imports nothing from bench/). Its facts are read only where a file states them in a
form the course's tools wrote: `meta.json` (`make bench`), `gpu.txt` (nvidia-smi's lines, then the versions), the
header line of a `make solutions` table, the README's `- command:` and `- commit:` lines and its "torch X, Triton
Y, driver Z" words; the runtime from a kernel release a file names ("6.18.44-fc-v1272"). A fact none of them states
is null (the runtime "unknown"); the date, where nothing else gives it, is the folder name's. The figures are
bench.figures' of the folder's files.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.figures import figures_in
from bench.records import Record, parse_record, runtime_of

GPU_NAME = re.compile(r"\bNVIDIA [A-Z]\d{2,4}\b(?: \d+GB HBM\w+)?")  # "NVIDIA H100 80GB HBM3", "NVIDIA H200"
VERSION = r"(\d+\.\d+(?:\.\d+)?(?:\+\w+)?)"
KERNEL = re.compile(r"\b\d+\.\d+\.\d+-fc(?:-[\w.]+)?\b")


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""


def _gpu_txt(text: str) -> dict[str, object]:
    """gpu.txt in its forms: "NAME, DRIVER" lines (with an index first, or under nvidia-smi's CSV header), or
    nvidia-smi's table; a line of versions (named, or torch's "+cuXXX" version between Python's and Triton's); a
    "commit SHA" line."""
    facts: dict[str, object] = {}
    rows = [line for line in text.splitlines() if re.fullmatch(r"(\d+, )?NVIDIA [^,]+, \d[\d.]+", line.strip())]
    if rows:
        names = [line.strip().split(", ")[-2] for line in rows]
        facts.update(gpu=names[0], gpus=len(names), driver=rows[0].strip().split(", ")[-1])
    table = re.search(r"Driver Version: (\S+)", text)
    if table:
        names = re.findall(r"^\|\s+\d+\s+(NVIDIA [\w ]+?)\s{2,}", text, flags=re.M)
        facts.update(driver=table.group(1), **({"gpu": names[0], "gpus": len(names)} if names else {}))
    commit = re.search(r"^commit ([0-9a-f]{7,40})$", text, flags=re.M)
    if commit:
        facts["commit"] = commit.group(1)
    for line in text.splitlines():
        named = dict(re.findall(r"\b(python|torch|triton) (\S+)", line))
        if named:
            facts.update(named)
            continue
        torch = re.search(r"(?:^|\s)(\d+\.\d+\.\d+\+cu\d+) (\d+\.\d+\.\d+)\b", line)
        if torch:
            facts.update(torch=torch.group(1), triton=torch.group(2))
            python = re.match(r"(3\.\d+\.\d+)\b", line)
            if python:
                facts["python"] = python.group(1)
    return facts


def _readme(text: str) -> dict[str, object]:
    """The README's `- command:`/`- commands:` bullets (their `python ...` spans), `- commit:` line and versions."""
    facts: dict[str, object] = {}
    bullets = re.findall(r"^- commands?\b.*?(?=^\S|^- |\Z)", text, flags=re.M | re.S)
    commands = [c for b in bullets for c in re.findall(r"`([^`]+)`", b) if re.match(r"(\S+=\S+ )*python", c)]
    if commands:
        facts["commands"] = [re.sub(r"\s+", " ", c) for c in commands]
    commit = re.search(r"^- commit: ([0-9a-f]{7,40}\b.*)$", text, flags=re.M)  # not "added in ...", "not recorded"
    tree = re.search(r"^- tree: ([0-9a-f]{7,40})\b|\bThe tree was ([0-9a-f]{7,40})\b", text, flags=re.M)
    if tree:  # the README's correction of what the device's copy of the tree said
        facts["commit"] = tree.group(1) or tree.group(2)
    elif commit:
        facts["commit"] = commit.group(1).strip()
    for key, pattern in (("torch", rf"\btorch {VERSION}"), ("triton", rf"\b[Tt]riton {VERSION}"),
                         ("python", rf"\b[Pp]ython {VERSION}"), ("driver", r"\bdriver (\d+\.\d+\.\d+)")):  # fmt: skip
        found = set(re.findall(pattern, text))
        if len(found) == 1:  # one version stated; two (a run before and after an upgrade) say nothing of the record
            facts[key] = found.pop()
    return facts


def backfill_record(folder: Path) -> Record:
    """The record of `folder` from what its files state (see the module's docstring)."""
    facts: dict[str, Any] = {}
    sources = []
    readme = _text(folder / "README.md")
    if readme:
        facts.update(_readme(readme))
        names = [n for n in dict.fromkeys(GPU_NAME.findall(readme)) if n.split()[1].lower() in folder.name]
        if names:
            facts["gpu"] = names[0]
        sources.append("README.md")
    tables = sorted(folder.rglob("solutions*.md"))
    if tables:
        head = re.match(rf"`make solutions` on (.+?), torch {VERSION}, triton {VERSION}", _text(tables[0]))
        if head:
            facts.update(gpu=head.group(1), torch=head.group(2), triton=head.group(3))
            sources.append(tables[0].relative_to(folder).as_posix())
    if (folder / "gpu.txt").exists():
        facts.update(_gpu_txt(_text(folder / "gpu.txt")))
        sources.append("gpu.txt")
    meta = json.loads(_text(folder / "meta.json") or "{}")
    if meta:
        facts.update({k: meta[k] for k in ("gpu", "torch", "triton", "python", "commit") if meta.get(k)})
        if meta.get("command"):
            facts["commands"] = [meta["command"]]
        if re.match(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC", str(meta.get("date"))):
            facts["date"] = meta["date"][:10] + "T" + meta["date"][11:16] + "Z"
        sources.append("meta.json")
    if "-cpu-" in folder.name:
        facts.update(gpu="cpu", gpus=0)
    kernels = {k for p in folder.rglob("*") if p.is_file() and p.suffix != ".json" for k in KERNEL.findall(_text(p))}
    kernel = kernels.pop() if len(kernels) == 1 else None
    machine = {k: facts.get(k) for k in ("gpu", "gpus", "driver", "python", "torch", "triton")}
    machine.update(runtime=runtime_of(kernel or ""), kernel=kernel)
    read = ", ".join(sources) or "the folder name"
    notes = [f"back-filled by `python -m bench records backfill` from {read}: a fact they do not state is null; the "
             "README says what the run shows and how each file was made"]  # fmt: skip
    if meta.get("merged"):
        notes.append("rows of later runs are merged into results.csv: meta.json's `merged` says which, with their "
                     "GPU, date and versions")  # fmt: skip
    data = {"commands": facts.get("commands", []), "commit": facts.get("commit"), "machine": machine, "notes": notes,
            "date": facts.get("date", folder.name[:10])}  # fmt: skip
    return replace(parse_record(data, f"the record back-filled for {folder}"), figures=figures_in(folder))
