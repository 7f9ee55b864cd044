"""Performance models of device types: the fitted kernel-time model a spec carries
(`model`) and fitting it from the kernels of real traces (`fitting`)."""
