"""Check this install against reference records shipped in the repo (results/reference/NAME/cells/*.json).

    python -m scripts.verify                                   # run the demo profile, compare with the CPU reference
    python -m scripts.verify --run results/demo-… --reference results/reference/nvidia-h200

Per cell: the reference's time and quality metric, this machine's, their ratio and a verdict. Time is judged with a
tolerance (shared machines are noisy: compare ratios, not absolute seconds); quality may not drop by more than a
margin. Exit code 1 when any cell is slower than the tolerance, lost quality, or did not finish.
"""
import argparse
import sys
from pathlib import Path

from tabulate import tabulate

from scripts import report, run
from scripts.matrix import ROOT
from shared.record import RecordError, read_record

REFERENCES = ROOT / "results" / "reference"
DEFAULT_REFERENCE = REFERENCES / "cpu-2core"
SLOWER = 1.5           # measured / reference time above this is "slower"
FASTER = 1 / 1.5       # below this is "faster" (fine, but worth knowing: a different machine?)
QUALITY_MARGIN = 0.05  # accuracy or AUC may be this much lower before it is a "quality drop"


def records_by_id(folder):
    try:
        return {p.stem: read_record(p) for p in sorted(Path(folder).glob("cells/*.json"))}
    except RecordError as e:
        raise run.RunError(str(e)) from e


def verdict(expected, measured):
    """One comparison row: (cell, metric, expected, measured, ratio, verdict)."""
    task = expected["cell"]["task"]
    key, quality = report.TIME_METRIC[task], report.QUALITY_METRIC.get(task)
    if measured is None or measured["status"] != "ok":
        return [key, expected["metrics"].get(key), None, None,
                "missing" if measured is None else measured["status"]]
    e, m = expected["metrics"][key], measured["metrics"][key]
    ratio = m / e
    word = "slower" if ratio > SLOWER else "faster" if ratio < FASTER else "ok"
    if quality and measured["metrics"].get(quality, 0) < expected["metrics"].get(quality, 0) - QUALITY_MARGIN:
        word = f"{quality} drop ({measured['metrics'][quality]:.3f} < {expected['metrics'][quality]:.3f})"
    return [key, e, m, ratio, word]


def compare(reference, measured):
    rows = []
    for cell_id, expected in reference.items():
        if expected["status"] == "ok":
            rows.append([cell_id, *verdict(expected, measured.get(cell_id))])
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m scripts.verify", description=__doc__.split("\n")[0])
    ap.add_argument("--reference", type=Path, default=DEFAULT_REFERENCE, help="a reference run folder")
    ap.add_argument("--run", type=Path, help="compare this run folder instead of running the profile")
    ap.add_argument("--profile", default="demo")
    args = ap.parse_args(argv)
    try:
        reference = records_by_id(args.reference)
        if not reference:
            raise run.RunError(f"no reference records under {args.reference}/cells; available: "
                               f"{', '.join(p.name for p in REFERENCES.iterdir()) if REFERENCES.exists() else 'none'}")
        if args.run is None:
            run.main(["--profile", args.profile])
            args.run = max((p for p in run.RESULTS.glob(f"{args.profile}-*") if p.is_dir()), key=lambda p: p.name)
        rows = compare(reference, records_by_id(args.run))
    except run.RunError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"reference {args.reference} vs {args.run}")
    print(tabulate(rows, headers=["cell", "metric", "expected", "measured", "ratio", "verdict"], floatfmt=".3g"))
    return 0 if all(r[-1] in ("ok", "faster") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
