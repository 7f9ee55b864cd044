"""The Chakra execution trace schema (MLCommons ``et_def.proto``, Apache-2.0) and its
generated protobuf module. Regenerate with ``make proto``; see NOTICE."""
