"""The record of a run: one `record.json` per folder of bench/results/, which a program can read back and compare.

A record says what made the run (its commands, the commit, the date), where it ran (`Machine`: the GPU or "cpu", the
driver, the runtime read from the kernel's release, the versions of Python, torch and Triton) and what it measured
(`Figure`s: a name, a metric, a unit, a value, and optionally the baseline it was timed beside). A fact no one stated
is null, never a guess. The prose README of a folder stays: it says what the run shows.

    python -m bench records list [FOLDER ...]     # one line per record
    python -m bench records show A                # a record's facts and figures
    python -m bench records compare A B [--a-file F] [--b-file F]  # figures matched by name and metric, B/A
    python -m bench records write FOLDER COMMAND [--commit SHA]  # this machine's facts, the folder's figures
    python -m bench records backfill FOLDER ...   # a record from what a folder's files state (`make bench`'s)

A, B: a run folder or its record.json. A GPU run writes its record with `write_record(folder, command)` (or `records
write`, its command line).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import platform
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from checks.bench_results import RESULTS, shown

ROOT = Path(__file__).resolve().parent.parent
RECORD = "record.json"  # the record's file name inside its run folder
SCHEMA = 1  # the format's version, in every record; a reader refuses another
RUNTIMES = ("firecracker", "gvisor", "unknown")


class RecordError(ValueError):
    """A record that does not follow the format: the message says which file, which field and what is wrong."""


@dataclass(frozen=True)
class Figure:
    """One measured number: `name` what was measured (say "make solutions/4 matmul_fast" or "wall-times/1/warm,
    second"), `metric` which of its numbers ("time", "rate", "report"), `unit` ("ms", "s", "GB/s"), `value`; and, where
    it was timed beside a baseline, the baseline's name and value and `ratio`, how many times faster than the baseline
    it was (above 1: faster), as the run computed it. `file`: the folder's file it was read from (a run before a change
    and one after it have the same names in two files), None where the command gave it."""

    name: str
    metric: str
    unit: str
    value: float
    baseline: str | None = None
    baseline_value: float | None = None
    ratio: float | None = None
    file: str | None = None


@dataclass(frozen=True)
class Machine:
    """Where a run ran: `gpu` the GPU's name or "cpu" (None: not stated), `gpus` how many GPUs it had, `driver` the
    NVIDIA driver's version, `runtime` "firecracker", "gvisor" or "unknown" (from `kernel`, the kernel's release)."""

    gpu: str | None = None
    gpus: int | None = None
    driver: str | None = None
    runtime: str = "unknown"
    kernel: str | None = None
    python: str | None = None
    torch: str | None = None
    triton: str | None = None


@dataclass(frozen=True)
class Record:
    """A run folder's record: its commands, commit and date (ISO 8601, UTC), its machine, its figures and notes."""

    commands: list[str]
    commit: str | None
    date: str
    machine: Machine
    figures: list[Figure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    schema: int = SCHEMA

    def to_json(self) -> str:
        """The record as JSON, one figure a line (its unset baseline fields left out), so that a diff reads well."""
        data = asdict(self)
        data = {"schema": data.pop("schema"), **data}
        figures = [{k: v for k, v in f.items() if v is not None} for f in data.pop("figures")]
        text = json.dumps(data, indent=1, ensure_ascii=False)[: -len("\n}")]
        lines = ",\n".join(f"  {json.dumps(f, ensure_ascii=False)}" for f in figures)
        return text + (f',\n "figures": [\n{lines}\n ]\n}}\n' if figures else ',\n "figures": []\n}\n')


# -- reading: every field checked against its type, a clear message for the first that is wrong


def _checked(value: Any, kind: str, where: str) -> Any:
    """`value` if it is of `kind` (a field's annotation as written: "str | None", "float", "list[str]", ...)."""
    if kind.endswith(" | None"):
        return None if value is None else _checked(value, kind.removesuffix(" | None"), where)
    if kind == "str" and isinstance(value, str):
        return value
    if kind == "int" and isinstance(value, int) and not isinstance(value, bool):
        return value
    if kind == "float" and isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    if kind == "list[str]" and isinstance(value, list):
        return [_checked(v, "str", f"{where}[{i}]") for i, v in enumerate(value)]
    if kind == "list[Figure]" and isinstance(value, list):
        return [_typed(Figure, v, f"{where}[{i}]") for i, v in enumerate(value)]
    if kind == "Machine":
        return _typed(Machine, value, where)
    wanted = {"float": "a finite number", "int": "a whole number", "str": "a string", "list[str]": "a list of strings",
              "list[Figure]": "a list of figures"}.get(kind, kind)  # fmt: skip
    raise RecordError(f"{where} is {value!r}: it must be {wanted}")


def _typed(cls: type, data: Any, where: str) -> Any:
    if not isinstance(data, Mapping):
        raise RecordError(f"{where} is {data!r}: it must be an object with the fields {[f.name for f in fields(cls)]}")
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise RecordError(f"{where} has fields the format does not know: {unknown} (it knows {list(known)})")
    required = [name for name, f in known.items() if f.default is MISSING and f.default_factory is MISSING]
    missing = [name for name in required if name not in data]
    if missing:
        raise RecordError(f"{where} lacks the field(s) {missing}")
    return cls(**{name: _checked(value, str(known[name].type), f"{where}.{name}") for name, value in data.items()})


def parse_record(data: Any, where: str = "the record") -> Record:
    """A Record from decoded JSON, or RecordError saying what is wrong and where."""
    if isinstance(data, Mapping) and data.get("schema", SCHEMA) != SCHEMA:
        raise RecordError(f"{where}.schema is {data.get('schema')!r}: this reader reads schema {SCHEMA}")
    record: Record = _typed(Record, data, where)
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}([T ][\d:]+Z?)?", record.date):
        raise RecordError(f"{where}.date is {record.date!r}: it must be an ISO date, 2026-11-29 or 2026-11-29T05:48Z")
    if record.machine.runtime not in RUNTIMES:
        raise RecordError(f"{where}.machine.runtime is {record.machine.runtime!r}: it must be one of {RUNTIMES}")
    seen: set[tuple[str | None, str, str]] = set()
    for i, f in enumerate(record.figures):
        if not f.name or not f.metric:
            raise RecordError(f"{where}.figures[{i}] has an empty name or metric")
        if (f.file, f.name, f.metric) in seen:
            raise RecordError(f"{where}.figures[{i}]: {f.name!r} {f.metric!r} is there twice" +
                              (f" in {f.file}" if f.file else ""))  # fmt: skip
        seen.add((f.file, f.name, f.metric))
    return record


def record_path(path: Path) -> Path:
    """A run folder's record.json, or the record file given."""
    return path / RECORD if path.is_dir() else path


def read_record(path: Path) -> Record:
    """The record of a run folder (or a record.json); RecordError if there is none or it is malformed."""
    file = record_path(path)
    where = shown(file)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RecordError(f"{where} does not exist: `python -m bench records backfill {shown(file.parent)}` writes "
                          "one from the folder's files") from None  # fmt: skip
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecordError(f"{where} is not JSON: {exc}") from None
    return parse_record(data, where)


# -- the machine's facts


def runtime_of(release: str) -> str:
    """The sandbox a kernel release says the run was in: Firecracker's guests ("6.18.44-fc-v1272"), gVisor (which
    reports "4.4.0"); else "unknown"."""
    if re.search(r"-fc(-|$)", release):
        return "firecracker"
    if release.strip() == "4.4.0":
        return "gvisor"
    return "unknown"


def _nvidia_driver() -> str | None:
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)  # fmt: skip
        lines = smi.stdout.split()
        if smi.returncode == 0 and lines:
            return lines[0]
    except (OSError, subprocess.SubprocessError):
        pass
    try:  # the kernel module says it too: "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  ..."
        found = re.search(r"Kernel Module\s+(\d[\d.]+)", Path("/proc/driver/nvidia/version").read_text())
        return found.group(1) if found else None
    except OSError:
        return None


def machine_facts() -> Machine:
    """This machine: the first GPU torch sees (or "cpu"), their number, the driver (nvidia-smi, else the kernel
    module's version), the runtime from the kernel's release, the versions of Python, torch and Triton."""
    versions: dict[str, str | None] = {}
    for module in ("torch", "triton"):
        try:
            versions[module] = __import__(module).__version__
        except ImportError:
            versions[module] = None
    gpu, gpus, driver = "cpu", 0, None
    if versions["torch"] is not None:
        import torch

        if torch.cuda.is_available():
            gpu, gpus, driver = torch.cuda.get_device_name(0), torch.cuda.device_count(), _nvidia_driver()
    release = platform.release()
    return Machine(gpu=gpu, gpus=gpus, driver=driver, runtime=runtime_of(release), kernel=release or None,
                   python=platform.python_version(), torch=versions["torch"], triton=versions["triton"])  # fmt: skip


def current_commit() -> str:
    """The checkout's commit, with '(and uncommitted changes)' when the tree differs from it."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True)  # fmt: skip
    except OSError:
        return "unknown (no git)"
    commit = head.stdout.strip() or "unknown"
    return commit + (" (and uncommitted changes)" if dirty.stdout.strip() else "")


# -- writing


def write_record(
    folder: Path | str,
    command: str,
    figures: Iterable[Figure | Mapping[str, Any]] | None = None,
    *,
    commit: str | None = None,
    machine: Machine | None = None,
    notes: Iterable[str] = (),
) -> Path:
    """Write (or add to) `folder`/record.json and return its path.

    `command`: the command line that made the results, as a reader would type it. `figures`: Figure objects or dicts
    with Figure's fields ({"name": "1/warm, second", "metric": "report", "unit": "s", "value": 8.0}; optional
    "baseline", "baseline_value", "ratio", "file"); None reads them from the folder's result files (bench.figures: `make
    solutions` tables, wall-time and kept-plan TSVs, results.csv, decoding-graphs CSVs). `commit` defaults to the
    checkout's, `machine` to `machine_facts()` of this machine, the date to now (UTC).

    A folder has one record: a second call adds its command and figures to it (a figure of the same name, metric and
    file replaces the earlier one); it raises RecordError when the commit or the machine differ from the record's, since
    a record is one tree on one machine: such a run wants a folder of its own.
    """
    from bench.figures import figures_in

    folder = Path(folder)
    new = figures_in(folder) if figures is None else [f if isinstance(f, Figure) else _typed(Figure, f, "a figure")
                                                      for f in figures]  # fmt: skip
    commit = current_commit() if commit is None else commit
    machine = machine_facts() if machine is None else machine
    file = folder / RECORD
    if file.exists():
        old = read_record(file)
        if old.commit != commit:
            raise RecordError(f"{shown(file)} is of commit {old.commit}, this run of {commit}: give it its own folder")
        same = ("gpu", "driver", "python", "torch", "triton")
        if [getattr(old.machine, k) for k in same] != [getattr(machine, k) for k in same]:
            raise RecordError(f"{shown(file)} was made on {old.machine}, this run is on {machine}: give it its own "
                              "folder")  # fmt: skip
        replaced = {(g.file, g.name, g.metric) for g in new}  # a figure of the same file, name and metric: the new one
        kept = [f for f in old.figures if (f.file, f.name, f.metric) not in replaced]
        record = Record([*old.commands, command], old.commit, old.date, old.machine, kept + new,
                        [*old.notes, *(n for n in notes if n not in old.notes)])  # fmt: skip
    else:
        date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        record = Record([command], commit, date, machine, new, list(notes))
    parse_record(json.loads(record.to_json()), shown(file))  # what is written reads back
    folder.mkdir(parents=True, exist_ok=True)
    file.write_text(record.to_json(), encoding="utf-8")
    return file


def record_table(file: Path | str, text: str, command: str) -> Path:
    """Write a tool's printed table to `file`, in a run folder, and add the folder's figures, read from its files, to
    its record (`write_record`); the record's path. RecordError where no reader of bench.figures reads a file of
    that name (a wall-time table's name has "wall" in it and ends in .tsv: say, wall-after.tsv)."""
    from bench.figures import reader_of

    file = Path(file)
    if reader_of(file) is None:
        raise RecordError(f"{file.name}: bench.figures reads no file of this name, so its figures would be lost")
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(text.rstrip("\n") + "\n", encoding="utf-8")
    return write_record(file.parent, command)


def refresh_figures(folder: Path, command: str) -> Path:
    """After `command` changed the result files of `folder` (`python -m bench merge-run`), its record's figures read
    from them again, the command added to its commands; nothing where the folder has no record."""
    from bench.figures import figures_in

    file = folder / RECORD
    if file.exists():
        old = read_record(file)
        record = replace(old, commands=[*old.commands, command], figures=figures_in(folder))
        file.write_text(record.to_json(), encoding="utf-8")
    return file


# -- the command: list, show, compare, backfill


def _versions(m: Machine) -> str:
    return ", ".join(f"{k} {getattr(m, k) or '?'}" for k in ("python", "torch", "triton"))


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def list_lines(paths: list[Path]) -> list[str]:
    """One line per record: folder, date, GPU, driver, runtime, versions, how many figures."""
    lines = []
    for path in paths:
        r = read_record(path)
        m = r.machine
        gpu = (m.gpu or "GPU not stated") + (f" x{m.gpus}" if m.gpus and m.gpus > 1 else "")
        lines.append(f"{record_path(path).parent.name}\t{r.date}\t{gpu}\tdriver {m.driver or '?'}\t{m.runtime}\t"
                     f"{_versions(m)}\t{len(r.figures)} figures")  # fmt: skip
    return lines


def show_lines(path: Path) -> list[str]:
    r = read_record(path)
    m = r.machine
    lines = [f"record: {shown(record_path(path))}", f"date: {r.date}", f"commit: {r.commit or 'not stated'}",
             *(f"command: {c}" for c in r.commands),
             f"GPU: {m.gpu or 'not stated'}" + (f" (x{m.gpus})" if m.gpus else ""), f"driver: {m.driver or '?'}",
             f"runtime: {m.runtime}" + (f" (kernel {m.kernel})" if m.kernel else ""), f"versions: {_versions(m)}",
             *(f"note: {n}" for n in r.notes), "",
             "file\tname\tmetric\tunit\tvalue\tbaseline\tbaseline value\tratio"]  # fmt: skip
    for f in r.figures:
        lines.append(f"{f.file or '-'}\t{f.name}\t{f.metric}\t{f.unit}\t{_number(f.value)}\t{f.baseline or '-'}\t"
                     f"{_number(f.baseline_value)}\t{_number(f.ratio)}")  # fmt: skip
    return lines


@dataclass(frozen=True)
class Compared:
    """One figure of A and B matched by name and metric; `ratio` B/A (None where the units differ or A is 0)."""

    name: str
    metric: str
    unit: str
    a: float
    b: float
    ratio: float | None


def of_file(record: Record, file: str | None, which: str) -> list[Figure]:
    """The record's figures read from `file` (its path in the folder, with or without its suffix); all where None."""
    if file is None:
        return record.figures
    found = [f for f in record.figures if f.file and file in (f.file, f.file.rsplit(".", 1)[0])]
    if not found:
        files = sorted({f.file for f in record.figures if f.file})
        raise RecordError(f"{which} has no figure read from {file!r}: its files are {files or 'none'}")
    return found


def compare(a: Record, b: Record, a_file: str | None = None, b_file: str | None = None) -> list[Compared]:
    """The figures of A and B with the same name and metric, in A's order (of the files given, where given).
    RecordError where a name and metric matched is in several files of A or B: which of them is meant is for the
    caller to say (a_file, b_file)."""
    picked = {"A": of_file(a, a_file, "A"), "B": of_file(b, b_file, "B")}
    keys = {which: Counter((f.name, f.metric) for f in found) for which, found in picked.items()}
    both = keys["A"].keys() & keys["B"].keys()
    for which, found in picked.items():
        twice = sorted(k for k in both if keys[which][k] > 1)
        if twice:
            files = sorted({f.file or "-" for f in found if (f.name, f.metric) == twice[0]})
            raise RecordError(f"{which} has {twice[0][0]!r} {twice[0][1]!r} in {len(files)} files ({', '.join(files)})"
                              f": say which with --{which.lower()}-file FILE")  # fmt: skip
    of_b = {(f.name, f.metric): f for f in picked["B"]}
    rows = []
    for f in picked["A"]:
        g = of_b.get((f.name, f.metric))
        if g is not None:
            ratio = g.value / f.value if f.unit == g.unit and f.value else None
            unit = f.unit if f.unit == g.unit else f"{f.unit} / {g.unit}"
            rows.append(Compared(f.name, f.metric, unit, f.value, g.value, ratio))
    return rows


def compare_lines(a_path: Path, b_path: Path, a_file: str | None = None, b_file: str | None = None,
                  ) -> tuple[list[str], bool]:  # fmt: skip
    """The table of `compare`, or a message saying why nothing matched; and whether anything did."""
    a, b = read_record(a_path), read_record(b_path)
    pairs = ((a_path, a_file), (b_path, b_file))
    names = [shown(record_path(p).parent) + (f" ({file})" if file else "") for p, file in pairs]
    rows = compare(a, b, a_file, b_file)
    if not rows:
        sample = lambda r: ", ".join(repr(f"{f.name} {f.metric}") for f in r.figures[:3]) or "no figures"
        return [f"No figure of {names[0]} has the name and metric of one of {names[1]}: the first has "
                f"{len(a.figures)} ({sample(a)}), the second {len(b.figures)} ({sample(b)})."], False  # fmt: skip
    lines = [f"A: {names[0]} ({a.date}, {a.machine.gpu or 'GPU not stated'}, {_versions(a.machine)})",
             f"B: {names[1]} ({b.date}, {b.machine.gpu or 'GPU not stated'}, {_versions(b.machine)})",
             f"{len(rows)} figures in both (A has {len(a.figures)}, B {len(b.figures)})", "",
             "name\tmetric\tunit\tA\tB\tB/A"]  # fmt: skip
    lines += [f"{r.name}\t{r.metric}\t{r.unit}\t{_number(r.a)}\t{_number(r.b)}\t{_number(r.ratio)}" for r in rows]
    return lines, True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench records", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    listed = commands.add_parser("list", help="one line per record (every folder of bench/results/ by default)")
    listed.add_argument("paths", nargs="*", type=Path, help="run folders or record files")
    commands.add_parser("show", help="a record's facts and figures").add_argument("path", type=Path)
    compared = commands.add_parser("compare", help="the figures of A and B matched by name and metric, B/A")
    compared.add_argument("a", type=Path, help="run folder or record file A")
    compared.add_argument("b", type=Path, help="run folder or record file B")
    compared.add_argument("--a-file", help="only A's figures read from this file of its folder (say wall-after.tsv)")
    compared.add_argument("--b-file", help="only B's figures read from this file of its folder")
    write = commands.add_parser("write", help="write (or add to) a folder's record: this machine, the folder's files")
    write.add_argument("folder", type=Path, help="the run folder")
    write.add_argument("command", help="the command line that made the folder's results")
    write.add_argument("--commit", help="the commit of the tree that ran (default: the checkout's)")
    backfill = commands.add_parser("backfill", help="write a folder's record from what its files state")
    backfill.add_argument("folders", nargs="+", type=Path, help="run folders")
    backfill.add_argument("--force", action="store_true", help="replace a record that is there")
    args = parser.parse_args(argv)
    try:
        if args.action == "list":
            paths = args.paths or sorted(p for p in RESULTS.iterdir() if (p / RECORD).exists())
            print("\n".join(list_lines(paths)))
        elif args.action == "show":
            print("\n".join(show_lines(args.path)))
        elif args.action == "write":
            file = write_record(args.folder, args.command, commit=args.commit)
            print(f"Wrote {shown(file)} ({len(read_record(file).figures)} figures).")
        elif args.action == "compare":
            lines, matched = compare_lines(args.a, args.b, args.a_file, args.b_file)
            print("\n".join(lines))
            return 0 if matched else 1
        else:
            from bench.backfill import backfill_record

            for folder in args.folders:
                if (folder / RECORD).exists() and not args.force:
                    print(f"{shown(folder / RECORD)} is there already: --force replaces it.", file=sys.stderr)
                    return 1
                file = folder / RECORD
                file.write_text(backfill_record(folder).to_json(), encoding="utf-8")
                print(f"Wrote {shown(file)} ({len(read_record(file).figures)} figures).")
    except RecordError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
