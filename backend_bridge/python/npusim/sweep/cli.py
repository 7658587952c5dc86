"""`npusim sweep` and `npusim compare`: the command-line faces of design-space exploration.

npusim sweep [run] SWEEP.yaml [--out DIR] [--jobs N | --executor dask --scheduler tcp://HOST:PORT] [--dry-run]
                   [--retry-failed] [--search optuna --trials N] [--quiet]
npusim sweep report DIR
npusim compare REPORT_A.json REPORT_B.json
"""

import os
import sys
from pathlib import Path

from .located_yaml import SweepFileError

SUBCOMMANDS = ("run", "report")


def add_commands(commands):
    sweep = commands.add_parser(
        "sweep",
        help="explore chip designs: run workloads over a sweep of configurations (docs/sweeps.md)",
        description="npusim sweep SWEEP.yaml runs a sweep; npusim sweep report DIR draws its plots and HTML page.",
    )
    actions = sweep.add_subparsers(dest="sweep_command", required=True)
    run = actions.add_parser("run", help="run a sweep file (the default: `npusim sweep SWEEP.yaml`)")
    run.add_argument("sweep_file", help="the sweep file (YAML; docs/sweeps.md)")
    run.add_argument("--out", help="result directory (default: ./SWEEP-results, SWEEP the sweep file's stem)")
    run.add_argument("--jobs", type=int, help="runs at once on this machine (default: the cores)")
    run.add_argument(
        "--executor", choices=["local", "dask"], default="local", help="where runs execute (default local)"
    )
    run.add_argument("--scheduler", help="the Dask scheduler's address, tcp://HOST:PORT (--executor dask)")
    run.add_argument("--dry-run", action="store_true", help="list the points and rejections, estimate the time")
    run.add_argument("--retry-failed", action="store_true", help="run again the runs that failed before")
    run.add_argument("--search", choices=["optuna"], help="search the axes (NSGA-II) instead of running them all")
    run.add_argument("--trials", type=int, default=20, help="--search: trials in the study, in all (default 20)")
    run.add_argument("--quiet", action="store_true", help="no progress bar or per-failure lines")
    report = actions.add_parser("report", help="write PNG plots and an HTML page for a sweep's results")
    report.add_argument("directory", help="the sweep's result directory")
    compare = commands.add_parser("compare", help="per-kernel and per-operator differences between two run reports")
    compare.add_argument("report_a", help="a report JSON (npusim run --report)")
    compare.add_argument("report_b", help="another report JSON")
    compare.add_argument("--top", type=int, default=25, help="rows per table (default 25)")


def normalise_argv(argv):
    """`npusim sweep SWEEP.yaml ...` means `npusim sweep run SWEEP.yaml ...`."""
    if len(argv) >= 2 and argv[0] == "sweep" and argv[1] not in (*SUBCOMMANDS, "-h", "--help"):
        return ["sweep", "run", *argv[1:]]
    return argv


def run_command(args):
    if args.command == "compare":
        from .compare import compare_reports

        print(compare_reports(args.report_a, args.report_b, top=args.top))
        return 0
    if args.sweep_command == "report":
        from .report import write_report

        page = write_report(args.directory)
        print(f"report written to {page}")
        return 0
    return _run(args)


def _run(args):
    from .dry_run import dry_run
    from .runner import SweepError, run_sweep
    from .spec import load_sweep

    try:
        sweep = load_sweep(args.sweep_file, search=bool(args.search))
    except SweepFileError as error:
        print(f"npusim sweep: {error}", file=sys.stderr)
        return 2
    out_dir = Path(args.out or f"{Path(args.sweep_file).stem}-results")
    jobs = args.jobs or os.cpu_count() or 1
    try:
        if args.dry_run and args.search:
            print(f"optuna NSGA-II search of {args.trials} trials, seed {sweep.seed}, over:")
            for axis in sweep.axes.values():
                space = list(axis.values) if axis.values is not None else f"[{axis.low}, {axis.high}]"
                print(f"  {axis.name}: {space}{' (log)' if axis.log else ''}")
            return 0
        if args.dry_run:
            dry_run(sweep, out_dir, jobs)
            return 0
        if args.search == "optuna":
            from .search import run_search

            table = run_search(
                sweep, out_dir, args.trials, args.executor, jobs, args.scheduler, args.retry_failed, args.quiet
            )
        else:
            table = run_sweep(sweep, out_dir, args.executor, jobs, args.scheduler, args.retry_failed, args.quiet)
    except (SweepError, ValueError) as error:
        print(f"npusim sweep: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"npusim sweep: interrupted; finished runs are kept in {out_dir}/cache, run again to resume")
        return 130
    failed = int((~table["status"].isin(["ok", "rejected"])).sum()) if len(table) else 0
    print(f"results in {out_dir}/summary.csv and {out_dir}/results.parquet ({len(table)} points, {failed} not ok)")
    return 1 if failed else 0
