"""Runs of the worker binary whose output is kept in a file: a run whose
output already holds a summary made by the same command is not run again,
so a study can be stopped and resumed."""
import json
import os
import shlex
import subprocess

DIVERGED_EXIT = 3  # the worker's exit status when a NaN stopped the run (its summary names the step)


class StudyError(Exception):
    pass


class StaleOutput(StudyError):
    """An output was made with other flags: the study stops before running anything more."""


class NotRun(Exception):
    """Reporting only, and the output of a run is not there yet."""


def read_summary(path):
    """The worker's summary line of `path` as a dict, or None when it has none."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("summary "):
                    return json.loads(line[len("summary "):])
    except FileNotFoundError:
        return None
    return None


class ReusingRunner:
    """Runs worker commands into output files (the command on the first line,
    shell-quoted, then what the worker printed), reusing any output that already holds a
    summary made by the same command (the binary's path aside).

    An output made by another command stops the study (StaleOutput), or with
    replace_stale is moved aside to OUT.stale and made again; with
    report_only nothing runs (NotRun for an output that is not there)."""

    def __init__(self, replace_stale=False, report_only=False):
        self.replace_stale = replace_stale
        self.report_only = report_only
        self.ran = 0
        self.reused = 0

    def run(self, out, cmd):
        """The summary of the run `out` holds, or of a new run of `cmd` written there."""
        summary = read_summary(out)
        if summary is not None:
            with open(out) as f:
                made_by = shlex.split(f.readline()[2:])
            if made_by[1:] != cmd[1:] and self.replace_stale and not self.report_only:
                os.replace(out, out + ".stale")
                print(f"  {out} was made with other flags: moved to {out}.stale, run again", flush=True)
                summary = None
            elif made_by[1:] != cmd[1:]:
                raise StaleOutput(f"{out} was made by '{shlex.join(made_by)}', not by this study's "
                                  f"'{shlex.join(cmd)}': delete it, use another --out, or --replace_stale")
        if summary is not None:
            self.reused += 1
            return summary
        if self.report_only:
            raise NotRun(out)
        os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
        partial = out + ".partial"
        with open(partial, "w") as f:
            f.write("# " + shlex.join(cmd) + "\n")
            f.flush()
            done = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT)
        summary = read_summary(partial)
        if summary is None or done.returncode not in (0, DIVERGED_EXIT):
            raise StudyError(f"{shlex.join(cmd)} failed (exit {done.returncode}); its output is {partial}")
        os.replace(partial, out)
        self.ran += 1
        return summary
