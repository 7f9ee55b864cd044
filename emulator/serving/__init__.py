"""Inference serving on the emulated devices: the request engine (`engine`), its live loop
(`live`), the spans it sends (`spans`) and the traces a serving capture writes (`trace`)."""
