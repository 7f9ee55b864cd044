"""Links inside the trace model: which runtime call launched which device work.

Part of the model, not an analysis: readers, writers (Chrome ``ac2g`` arrows, Chakra
dependencies) and analyses all need it.
"""

from __future__ import annotations

import numpy as np

from .trace import Kind, Trace


def launch_pairs(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """(launching runtime event, device event) index pairs, matched by correlation id."""
    dev = np.flatnonzero(trace.on_device & (trace.corr >= 0) & trace.is_slice)
    rt = np.flatnonzero((trace.kind == Kind.RUNTIME) & (trace.corr >= 0) & ~trace.on_device)
    if not len(dev) or not len(rt):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    # Outermost runtime call first when several share a correlation id.
    order = np.lexsort((-trace.dur[rt], trace.corr[rt]))
    rt = rt[order]
    keys = trace.corr[rt]
    k = np.searchsorted(keys, trace.corr[dev])
    k_ok = k < len(keys)
    match = np.zeros(len(dev), bool)
    match[k_ok] = keys[k[k_ok]] == trace.corr[dev][k_ok]
    return rt[k[match]], dev[match]
