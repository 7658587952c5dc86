"""The ``npusim`` command: run an unchanged PyTorch script on the simulated NPU, or list the chip presets.

npusim run [--config C] [--mode M] [--map-device cuda] [--trace T.json] [--report R.json] [--progress S]
           SCRIPT.py [ARGS...]
npusim configs
npusim sweep [run] SWEEP.yaml [...] | npusim sweep report DIR   (design-space exploration: docs/sweeps.md)
npusim compare REPORT_A.json REPORT_B.json
"""

import argparse
import os
import runpy
import sys

import npusim

from . import costs
from .device_map import map_device
from .progress import Progress
from .sweep import cli as sweep_cli


def list_configs():
    rows = []
    for name in npusim._C.presets(npusim.config_dirs()):
        c = npusim._C.configuration(name, npusim.config_dirs())
        rows.append(
            f"{name:<12}{c['chip.cores']:>6}{c['chip.clock_ghz']:>8.2f}{c['chip.technology_nm']:>5}"
            f"{c['core.systolic_rows']:>6}x{c['core.systolic_cols']:<5}{c['core.pe_type']:>6}{c['core.vector_lanes']:>7}"
            f"{c['core.scratchpad_kib']:>9}{c['dram.kind']:>8}{c['dram.bandwidth_gbps']:>9.1f}"
            f"{c['dram.capacity_mib'] // 1024:>6}{costs.peak_tops(c):>10.2f}{costs.area_mm2(c):>9.1f}"
            f"{costs.peak_power_w(c):>9.2f}{costs.peak_power_breakdown_w(c)['dram']:>8.2f}"
        )
    header = (
        f"{'preset':<12}{'cores':>6}{'GHz':>8}{'nm':>5}{'array':>12}{'PE':>6}{'lanes':>7}{'SPAD KiB':>9}{'DRAM':>8}"
        f"{'GB/s':>9}{'GiB':>6}{'peak TOPS':>10}{'mm^2':>9}{'peak W':>9}{'DRAM W':>8}"
    )
    print("\n".join([header, *rows]))
    print("\nTOPS: 2 x MACs per second in the PE type; area and peak power (the chip's; DRAM W: its memory devices at")
    print("peak bandwidth): estimates from published figures scaled to the node, docs/costs.md")


def exit_code_of(stop):
    """The process exit code of a SystemExit, printing its message as Python would."""
    if stop.code is None or isinstance(stop.code, int):
        return stop.code or 0
    print(stop.code, file=sys.stderr)
    return 1


def run_script(args):
    npusim.init(config=args.config, mode=args.mode)
    if args.trace and npusim.properties()["mode"] != "timed":
        print("npusim: --trace needs --mode timed (functional mode has no time); no engine tracks", file=sys.stderr)
    sys.argv = [args.script, *args.script_args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(args.script)))  # as `python SCRIPT` does
    exit_code = 0
    try:
        clock_ghz = npusim.properties()["clock_ghz"]
        with map_device(args.map_device), npusim.profile(trace=bool(args.trace)) as report:
            with Progress(args.progress, clock_ghz):
                runpy.run_path(args.script, run_name="__main__")
    except SystemExit as stop:
        exit_code = exit_code_of(stop)
    finally:  # the report of what ran, even when the script failed
        print(report.table())
        if args.report:
            report.to_json(args.report)
            print(f"report written to {args.report}")
        if args.trace:
            report.to_perfetto(args.trace)
            print(f"trace written to {args.trace} (open it at https://ui.perfetto.dev)")
    return exit_code


def main(argv=None):
    parser = argparse.ArgumentParser(prog="npusim", description="PyTorch on a simulated NPU.", allow_abbrev=False)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser(
        "run",
        help="run a PyTorch script on the simulated NPU and print its performance report",
        description="Runs SCRIPT unchanged with the npusim device available, then prints the report of everything "
        "the device did. Options go before SCRIPT; what follows SCRIPT is passed to it.",
        allow_abbrev=False,  # a script's own --m must not be taken for an abbreviation of --mode
    )
    run.add_argument("--config", help="preset name or YAML path (default: $NPUSIM_CONFIG or 'default')")
    run.add_argument("--mode", choices=["functional", "timed"], help="default: $NPUSIM_MODE or 'functional'")
    run.add_argument(
        "--map-device",
        choices=["cuda", "cpu"],
        help="send what the script puts on this device to npusim instead (cpu: tensors created without a device)",
    )
    run.add_argument("--trace", metavar="PATH", help="write a Perfetto trace with every engine's activity")
    run.add_argument("--report", metavar="PATH", help="write the report as JSON (schema: docs/reports.md)")
    run.add_argument(
        "--progress",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="print the device's progress to stderr every SECONDS on long runs (default 10; 0: never)",
    )
    run.add_argument("script", help="the PyTorch script to run")
    run.add_argument("script_args", nargs=argparse.REMAINDER, help="arguments for the script")
    commands.add_parser("configs", help="list the chip presets with their key figures")
    sweep_cli.add_commands(commands)
    args = parser.parse_args(sweep_cli.normalise_argv(sys.argv[1:] if argv is None else argv))
    if args.command == "configs":
        list_configs()
        return 0
    if args.command in ("sweep", "compare"):
        return sweep_cli.run_command(args)
    return run_script(args)


if __name__ == "__main__":
    sys.exit(main())
