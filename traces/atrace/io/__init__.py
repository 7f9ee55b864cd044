"""Reading and writing traces: Chrome / Kineto JSON, Chakra (JSON and protobuf), PyTorch host
execution traces, and the rank files of a distributed job."""
