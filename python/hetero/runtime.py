"""The runtime: the machine's devices, their statistics and traces."""
from __future__ import annotations

import ctypes
from typing import List, Optional

from . import _capi as C
from . import errors
from ._handle import Handle
from ._records import Record, record

FAMILIES = {"cpu": 0, "opencl": 1, "cuda": 2}


def _b(s: Optional[str]) -> Optional[bytes]:
    return None if s is None else s.encode()


class Runtime(Handle):
    """``hx_runtime``: the devices of the machine and the threads that run
    their tasks.

    Every argument is ``hx_runtime_options``'s, None meaning its default
    (the HX_* environment variable, then the built-in one)::

        with hetero.Runtime(devices="cpu", cpu_threads=4) as rt:
            print(rt.devices())
    """

    _kind = "runtime"

    def __init__(self, devices: Optional[str] = None, cpu_threads: int = 0, *, sched: Optional[str] = None,
                 pin_threads: int = -1, fpga_emulation: Optional[str] = None, inject: Optional[str] = None,
                 trace: Optional[str] = None, perfmodel_dir: Optional[str] = None,
                 machine: Optional[str] = None):
        if cpu_threads < 0:
            raise errors.InvalidArgument(errors.ERR_INVALID_ARG, f"cpu_threads {cpu_threads} is negative",
                                         "Runtime")
        o = C.hx_runtime_options_default()
        # The option strings must outlive hx_runtime_open only.
        keep = {k: _b(v) for k, v in dict(devices=devices, sched=sched, fpga_emulation=fpga_emulation,
                                           inject=inject, trace=trace, perfmodel_dir=perfmodel_dir,
                                           machine=machine).items()}
        for k, v in keep.items():
            if v is not None:
                setattr(o, k, v)
        o.cpu_threads = cpu_threads
        o.pin_threads = pin_threads
        p = ctypes.POINTER(C.hx_runtime)()
        errors.check(C.hx_runtime_open(ctypes.byref(p), ctypes.byref(o)), "hx_runtime_open")
        self._own(p, C.hx_runtime_close)

    def clock(self) -> float:
        """Seconds on the runtime's clock (virtual on a simulated machine)."""
        return C.hx_runtime_clock(self._p())

    @property
    def simulated(self) -> bool:
        return bool(C.hx_runtime_simulated(self._p()))

    def device_count(self) -> int:
        return C.hx_runtime_device_count(self._p())

    def devices(self) -> List[Record]:
        """``hx_device_info`` of every device, with ``family``/``kind`` names."""
        out = []
        for i in range(self.device_count()):
            d = C.hx_device_info()
            errors.check(C.hx_runtime_device_info(self._p(), i, ctypes.byref(d)), "hx_runtime_device_info")
            out.append(record(d, family_name=C.hx_device_family_str(d.family).decode(),
                              kind_name=C.hx_device_kind_str(d.kind).decode()))
        return out

    def topology(self) -> Record:
        t = C.hx_topology_info()
        errors.check(C.hx_runtime_topology(self._p(), ctypes.byref(t)), "hx_runtime_topology")
        return record(t)

    def absence_reason(self, family: str) -> Optional[str]:
        """Why a family ("cpu", "opencl", "cuda") has no device, or None."""
        if family not in FAMILIES:
            raise errors.InvalidArgument(errors.ERR_INVALID_ARG,
                                         f"family {family!r} is none of {', '.join(FAMILIES)}", "absence_reason")
        r = C.hx_runtime_absence_reason(self._p(), FAMILIES[family])
        return None if r is None else r.decode("utf-8", "replace")

    def stats(self) -> Record:
        """``hx_runtime_stats``: tasks, copies, migrations, retries..."""
        s = C.hx_runtime_stats()
        C.hx_runtime_stats_get(self._p(), ctypes.byref(s))
        return record(s)

    def device_stats(self, device: int) -> Record:
        s = C.hx_device_stats()
        errors.check(C.hx_device_stats_get(self._p(), device, ctypes.byref(s)), "hx_device_stats_get")
        return record(s)

    def reset_stats(self) -> None:
        C.hx_runtime_stats_reset(self._p())

    def wait_all(self) -> None:
        errors.check(C.hx_runtime_wait_all(self._p()), "hx_runtime_wait_all")

    def trace_start(self, path: str) -> None:
        """Records every task, copy and migration; :meth:`trace_stop` writes
        them to ``path`` as Chrome trace-event JSON."""
        errors.check(C.hx_runtime_trace_start(self._p(), path.encode()), "hx_runtime_trace_start")

    def trace_stop(self) -> None:
        errors.check(C.hx_runtime_trace_stop(self._p()), "hx_runtime_trace_stop")
