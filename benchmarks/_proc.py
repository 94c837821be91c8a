"""Small helpers the benchmark scripts share: this process's memory figures, the load, one-thread settings."""

from __future__ import annotations

import os

#: environment of a child process that must run on one thread (BLAS, OpenMP, numba)
ONE_THREAD = {
    v: "1" for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")
}


def status_mib(field):
    """A ``Vm*`` field of /proc/self/status, in MiB."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def reset_peak():
    """Reset this process's VmHWM to its current RSS (Linux ``clear_refs`` 5)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def load_average():
    a, b, c = os.getloadavg()
    return f"load average {a:.2f} {b:.2f} {c:.2f} on {os.cpu_count()} cores"
